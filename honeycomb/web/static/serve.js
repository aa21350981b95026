// honeycomb serve: a run page follows its run, and bars show their details on hover.
// Errors are recorded in <html data-errors> (the browser tests read them).
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

  var source = root.dataset.live;
  var live = document.getElementById('live');
  var updates = 0;
  root.dataset.updates = '0';
  if (!source || !live || !window.EventSource) { return; }
  var events = new EventSource(source);
  var fetching = null;
  var again = false;

  function key(form) { return form.dataset.worker + '\n' + form.dataset.call; }

  // The forms of the calls that still wait stay as they are (what a person typed in
  // them stays); forms of calls decided go, forms of new calls come.
  function mergeApprovals(fresh) {
    var here = document.getElementById('approvals');
    if (!here || !fresh) { return; }
    var list = here.querySelector('.approvals');
    var waiting = {};
    fresh.querySelectorAll('form.approval').forEach(function (f) { waiting[key(f)] = true; });
    var shown = {};
    list.querySelectorAll('form.approval').forEach(function (f) {
      if (waiting[key(f)]) { shown[key(f)] = true; } else { f.remove(); }
    });
    fresh.querySelectorAll('form.approval').forEach(function (f) {
      if (!shown[key(f)]) { list.appendChild(document.importNode(f, true)); }
    });
    here.hidden = list.querySelector('form.approval') === null;
  }

  function refresh() {
    if (fetching) { again = true; return; }
    var open = {};
    live.querySelectorAll('details[open]').forEach(function (d) { open[d.dataset.worker] = true; });
    fetching = fetch(source.replace(/\/events$/, '/live'), { credentials: 'same-origin' })
      .then(function (r) {
        if (!r.ok) { throw new Error('live part: HTTP ' + r.status); }
        return r.text();
      })
      .then(function (html) {
        var fresh = document.createElement('template');
        fresh.innerHTML = html;  // made and escaped by the server (honeycomb/web/pages.py)
        fresh.content.querySelectorAll('.part').forEach(function (part) {
          var here = document.getElementById(part.id);
          here.replaceChildren.apply(here, Array.prototype.slice.call(part.childNodes));
        });
        live.querySelectorAll('details').forEach(function (d) {
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
        if (again) { again = false; refresh(); }
      });
  }
  // The first change may already differ from what the page was made from (the run
  // went on before the events connected): every change is fetched.
  events.addEventListener('change', refresh);
  events.addEventListener('failed', function (e) {
    events.close();
    root.dataset.failed = JSON.parse(e.data).error;
  });
  events.addEventListener('end', function () {
    events.close();
    var wait = fetching || Promise.resolve();
    wait.then(function () { root.dataset.ended = 'true'; });
  });
})();
