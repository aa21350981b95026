// honeycomb serve: a page follows what it shows (a run, a session, the list of runs or
// of sessions), and bars show their details on hover.
// Errors are recorded in <html data-errors>, the parts taken in data-updates, and those
// answered (taken or not) in data-answers (the browser tests read them).
(function () {
  'use strict';
  var root = document.documentElement;
  window.addEventListener('error', function (e) {
    var line = String(e.message || e.type) + ' @' + (e.lineno || 0);
    root.dataset.errors = root.dataset.errors ? root.dataset.errors + '\n' + line : line;
  });

  var tip = document.getElementById('tip');
  function place(e) {
    var x = Math.min(e.clientX + 14, window.innerWidth - tip.offsetWidth - 8);
    tip.style.left = Math.max(x, 4) + 'px';
    tip.style.top = (e.clientY + 16) + 'px';
  }
  // Delegated: the live part is replaced as the run goes, its bars with it.
  document.addEventListener('mouseover', function (e) {
    var bar = e.target.closest && e.target.closest('.bar');
    if (!bar) { tip.hidden = true; return; }
    tip.textContent = bar.dataset.tip;
    tip.hidden = false;
    place(e);
  });
  document.addEventListener('mousemove', function (e) { if (!tip.hidden) { place(e); } });

  // A form sends its arguments only when they were edited: the box as the page made
  // it is the model's arguments, which the server has (and may be large).
  document.addEventListener('submit', function (e) {
    var box = e.target.querySelector && e.target.querySelector('textarea[name=arguments]');
    if (box && box.value === box.defaultValue) { box.disabled = true; }
  });
  window.addEventListener('pageshow', function () {  // back to a page a form left
    document.querySelectorAll('textarea[name=arguments]').forEach(function (box) {
      box.disabled = false;
    });
  });

  // The page's events (honeycomb/web/follow.py), and where its changing parts are
  // fetched: its own address unless it names another. Each is asked as by a page that
  // showed what it asks about: what the store no longer has went since, and is said so
  // (a 'gone' event, a part of no content: 204), not refused as an address the store
  // never had (404, which a browser logs as an error).
  function asShown(address) {
    var url = new URL(address, window.location.href);
    url.searchParams.set('shown', '1');
    return url.href;
  }
  var source = root.dataset.live;
  var partAddress = asShown(root.dataset.part || window.location.href);
  var what = root.dataset.follows || 'what it shows';  // 'its run' ...
  var updates = 0;
  var answers = 0;  // parts fetched whose answer the page is done with, taken or not
  root.dataset.updates = '0';
  if (!source || !window.EventSource) { return; }
  source = asShown(source);
  var events = null;
  var fetching = null;
  var again = false;
  var seen = null;  // the digest of what the page shows (or fetches), as its last change said it
  var went = 0;  // how often what the page shows went: a part asked for before is not taken

  // The items of the calls that still wait stay as they are (what a person typed in a
  // form stays); items gone from the run's approvals go (a call decided elsewhere, a
  // form whose time ran out: its key changes), new ones come.
  function mergeApprovals(fresh) {
    var here = document.getElementById('approvals');
    if (!here || !fresh) { return; }
    var list = here.querySelector('.approvals');
    var wanted = {};
    fresh.querySelectorAll('[data-key]').forEach(function (e) { wanted[e.dataset.key] = true; });
    var shown = {};
    list.querySelectorAll('[data-key]').forEach(function (e) {
      if (wanted[e.dataset.key]) { shown[e.dataset.key] = true; } else { e.remove(); }
    });
    fresh.querySelectorAll('[data-key]').forEach(function (e) {
      if (!shown[e.dataset.key]) { list.appendChild(document.importNode(e, true)); }
    });
    here.hidden = list.firstElementChild === null;
  }

  function refresh() {
    if (fetching) { again = true; return; }
    var asked = went;
    fetching = fetch(partAddress, { credentials: 'same-origin' })
      .then(function (r) {
        // Gone meanwhile: its events say so.
        if (r.status === 204) { return null; }
        if (!r.ok) { throw new Error('live part: HTTP ' + r.status); }
        return r.text();
      })
      .then(function (html) {
        // A part read before what the page shows went, come once the page said so,
        // would show it again (its calls to decide among it).
        if (html === null || asked !== went) { return; }
        var fresh = document.createElement('template');
        fresh.innerHTML = html;  // made and escaped by the server (honeycomb/web/pages.py)
        // The details open now, not as the update was asked for: a person may have
        // opened one while it was under way.
        var open = {};
        document.querySelectorAll('.part details[open][data-worker]').forEach(function (d) {
          open[d.dataset.worker] = true;
        });
        fresh.content.querySelectorAll('.part').forEach(function (part) {
          var here = document.getElementById(part.id);
          if (here) { here.replaceChildren.apply(here, Array.prototype.slice.call(part.childNodes)); }
        });
        document.querySelectorAll('.part details[data-worker]').forEach(function (d) {
          if (open[d.dataset.worker]) { d.open = true; }
        });
        mergeApprovals(fresh.content.getElementById('approvals'));
        updates += 1;
        root.dataset.updates = String(updates);
      })
      .catch(function (err) {
        root.dataset.errors = (root.dataset.errors ? root.dataset.errors + '\n' : '') + err;
      })
      .finally(function () {
        fetching = null;
        answers += 1;
        root.dataset.answers = String(answers);
        if (again) { again = false; refresh(); }
      });
  }
  // While the page does not follow what it shows, a line at its top says so, and why
  // (<html data-lost> holds it too); '' takes it away.
  var notice = null;
  function lost(why) {
    if (!notice) {
      notice = document.createElement('p');
      notice.className = 'lost error';
      document.body.insertBefore(notice, document.body.firstChild);
    }
    notice.textContent = why;
    notice.hidden = !why;
    if (why) { root.dataset.lost = why; } else { delete root.dataset.lost; }
  }

  // What it shows is no longer in the store (a run deleted, a session forgotten): the
  // page says so, keeps what it showed but the calls it had a person decide (there is
  // no run to decide them for), and asks now and then whether it came back (its
  // calls come back with it: the next update shows those that wait).
  function gone() {
    went += 1;
    again = false;  // a change said before it went: nothing to fetch
    lost(root.dataset.gone || 'This is no longer in the store.');
    var calls = document.getElementById('approvals');
    if (calls) {
      calls.hidden = true;
      calls.querySelectorAll('[data-key]').forEach(function (e) { e.remove(); });
    }
    seen = null;  // back, it is fetched again, whatever it shows
    setTimeout(follow, 5000);
  }

  // The events end when the server stops: the browser tries them again by itself
  // while the server does not answer. An answer that is not events (another server's
  // token, a server's error) ends its tries: the part says which, and the page tries
  // again later unless the token is what is wrong. So it does once what it shows went,
  // or the server can no longer read the store: its events say so (and why). The line
  // goes once a change comes: the events of a store still unreadable open, then fail.
  function follow() {
    if (document.visibilityState === 'hidden') { resting = true; return; }
    events = new EventSource(source);
    // The first change may already differ from what the page was made from (it went
    // on before the events connected): every change is fetched, but one the page
    // shows already (the first of each response of events says what it shows now).
    events.addEventListener('change', function (e) {
      lost('');
      var now = JSON.parse(e.data).seen;
      if (now !== seen) { seen = now; refresh(); }
    });
    events.addEventListener('failed', function (e) {
      events.close();
      lost('This page stopped following ' + what + ': ' + JSON.parse(e.data).error +
        '; it tries again.');
      setTimeout(follow, 2000);
    });
    events.addEventListener('gone', function () { events.close(); gone(); });
    // A response of events lasts so long (a server that stops waits for it): the
    // next is asked for at once, and its first change brings the page up to date.
    events.addEventListener('again', function () { events.close(); follow(); });
    // A run that ended with an answer changes no more, but may be deleted: the page
    // asks again now and then (each answer is at once: no change, the end).
    events.addEventListener('end', function () {
      events.close();
      lost('');
      var wait = fetching || Promise.resolve();
      wait.then(function () { root.dataset.ended = 'true'; });
      setTimeout(follow, 5000);
    });
    events.addEventListener('error', function () {
      if (events.readyState !== EventSource.CLOSED) {
        lost('Lost the server: this page follows ' + what + ' again once the server answers.');
        return;
      }
      fetch(partAddress, { credentials: 'same-origin' })
        .then(function (r) {
          if (r.status === 401) {
            lost('This page no longer follows ' + what + ': the server now has another ' +
              'token (it was started again without --token). Open the address it printed.');
          } else if (r.status === 204) {
            gone();
          } else {
            lost('This page stopped following ' + what + ' (the server answered HTTP ' +
              r.status + '); it tries again.');
            setTimeout(follow, 2000);
          }
        }, function () {
          lost('Lost the server: this page follows ' + what + ' again once the server answers.');
          setTimeout(follow, 2000);
        });
    });
  }
  // A tab out of sight follows nothing: a browser keeps six connections to a server
  // (HTTP/1.1), and each page following something holds one. Back in sight, the page
  // follows again, and its first change brings it up to date.
  var resting = false;
  document.addEventListener('visibilitychange', function () {
    if (document.visibilityState === 'hidden') {
      if (events && events.readyState !== EventSource.CLOSED) { events.close(); resting = true; }
    } else if (resting) {
      resting = false;
      follow();
    }
  });
  follow();
})();
