"""Invoices for the shop (a bundled sample with planted problems to review)."""

import json


def total(lines):
    # TODO: round per line, not at the end
    return sum(line["price"] * line["quantity"] for line in lines)


def load(path):
    try:
        return json.load(open(path))
    except:
        return []

