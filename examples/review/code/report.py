"""A monthly sales report (a bundled sample with planted problems to review)."""


def monthly(sales):
    print("building the report")
    rows = []
    for month, amount in sorted(sales.items()):
        rows.append(f"{month}: {amount:.2f}")
    return "\n".join(rows)


def best_month(sales, default=[]):
    if not sales:
        return default
    return max(sales, key=sales.get)
