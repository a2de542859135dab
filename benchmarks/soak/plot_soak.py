#!/usr/bin/env python3
"""Draws a soak run's CSV (troupe_soak --csv) as an SVG: resident memory and throughput against
time, one panel each, with the warm-up (first 20% of samples) shaded. Standard library only.

Usage: plot_soak.py SOAK.csv OUT.svg [TITLE]
"""
import csv
import sys

WIDTH, PANEL_HEIGHT, MARGIN = 760, 220, 60


def panel(top, xs, ys, label, colour, warm_until):
    x_max = max(xs) or 1
    y_max = max(ys) * 1.1 or 1
    left, right = MARGIN, WIDTH - 20
    bottom = top + PANEL_HEIGHT

    def px(x):
        return left + (right - left) * x / x_max

    def py(y):
        return bottom - (PANEL_HEIGHT - 20) * y / y_max

    parts = [
        f'<rect x="{left}" y="{top}" width="{px(warm_until) - left:.1f}" '
        f'height="{PANEL_HEIGHT}" fill="#eee"/>',
        f'<line x1="{left}" y1="{bottom}" x2="{right}" y2="{bottom}" stroke="black"/>',
        f'<line x1="{left}" y1="{top}" x2="{left}" y2="{bottom}" stroke="black"/>',
        f'<text x="{left}" y="{top - 6}" font-size="13">{label}</text>',
    ]
    for i in range(5):
        y = y_max * i / 4
        parts.append(f'<text x="{left - 6}" y="{py(y) + 4:.1f}" font-size="10" '
                     f'text-anchor="end">{y:.3g}</text>')
    for i in range(6):
        x = x_max * i / 5
        parts.append(f'<text x="{px(x):.1f}" y="{bottom + 14}" font-size="10" '
                     f'text-anchor="middle">{x:.0f} s</text>')
    points = " ".join(f"{px(x):.1f},{py(y):.1f}" for x, y in zip(xs, ys))
    parts.append(f'<polyline points="{points}" fill="none" stroke="{colour}" stroke-width="1.5"/>')
    return parts


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    with open(sys.argv[1]) as f:
        rows = list(csv.DictReader(f))
    if len(rows) < 2:
        sys.exit(f"{sys.argv[1]}: fewer than two samples")
    title = sys.argv[3] if len(sys.argv) > 3 else "troupe soak"
    t = [float(r["seconds"]) for r in rows]
    rss = [float(r["rss_mib"]) for r in rows]
    rate = [float(r["requests_per_second"]) for r in rows]
    warm = t[len(t) // 5]
    height = 2 * PANEL_HEIGHT + 3 * MARGIN
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" '
             f'font-family="sans-serif">',
             f'<rect width="{WIDTH}" height="{height}" fill="white"/>',
             f'<text x="{MARGIN}" y="22" font-size="15">{title} '
             f'({int(rows[-1]["requests_done"]):,} requests; grey: warm-up)</text>']
    parts += panel(MARGIN, t, rss, "resident memory (MiB)", "#c0392b", warm)
    parts += panel(2 * MARGIN + PANEL_HEIGHT, t, rate, "requests per second", "#2471a3", warm)
    parts.append("</svg>")
    with open(sys.argv[2], "w") as f:
        f.write("\n".join(parts) + "\n")


if __name__ == "__main__":
    main()
