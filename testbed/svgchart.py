"""Grouped bar charts as plain SVG, for the benchmarks' reports (no
plotting library in the harness: stdlib only)."""
from xml.sax.saxutils import escape

COLORS = ["#4a7ab5", "#c0504d", "#9bbb59", "#8064a2", "#f79646",
          "#4bacc6", "#7f7f7f", "#d99694", "#1f4e79", "#76923c"]


def grouped_bars(path, title, groups, series, unit="", log_note=""):
    """Write a grouped bar chart to @path.

    @groups: the x-axis groups, in order (e.g. fault kinds, applications);
    @series: {name: [value or None per group]}, one colour per name, in
    dict order.  A missing value leaves a gap labelled "-".  Values are
    drawn on one linear axis from 0 to the largest value."""
    names = list(series)
    vals = [v for s in series.values() for v in s if v]
    top = max(vals) if vals else 1.0
    pad, legend_w, plot_h = 60, 170, 300
    bar_w = 14
    group_w = bar_w * max(len(names), 1) + 24
    w = pad * 2 + legend_w + group_w * max(len(groups), 1)
    h = plot_h + pad * 2 + 30
    base = pad + plot_h + 20
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" '
           f'height="{h}" font-family="sans-serif" font-size="11">',
           f'<text x="{pad}" y="22" font-size="14">{escape(title)}</text>']
    if log_note:
        out.append(f'<text x="{pad}" y="38" font-size="10">'
                   f'{escape(log_note)}</text>')
    for t in range(5):
        v = top * t / 4
        y = base - plot_h * t / 4
        out.append(f'<line x1="{pad}" y1="{y:.0f}" x2="{w - legend_w - pad}"'
                   f' y2="{y:.0f}" stroke="#ddd"/>')
        out.append(f'<text x="{pad - 4}" y="{y + 4:.0f}" text-anchor="end">'
                   f'{v:.3g}{escape(unit)}</text>')
    for g, group in enumerate(groups):
        x0 = pad + g * group_w + 12
        for i, name in enumerate(names):
            v = series[name][g] if g < len(series[name]) else None
            x = x0 + i * bar_w
            if not v:
                out.append(f'<text x="{x + 3}" y="{base - 3}" '
                           'font-size="9">-</text>')
                continue
            bh = plot_h * v / top
            out.append(f'<rect x="{x}" y="{base - bh:.1f}" '
                       f'width="{bar_w - 2}" height="{bh:.1f}" '
                       f'fill="{COLORS[i % len(COLORS)]}">'
                       f'<title>{escape(name)}: {v:.4g}{escape(unit)}'
                       '</title></rect>')
        out.append(f'<text x="{x0}" y="{base + 16}">{escape(group)}</text>')
    out.append(f'<line x1="{pad}" y1="{base}" x2="{w - legend_w - pad}" '
               f'y2="{base}" stroke="black"/>')
    lx = w - legend_w
    for i, name in enumerate(names):
        y = pad + 16 * i
        out.append(f'<rect x="{lx}" y="{y - 9}" width="10" height="10" '
                   f'fill="{COLORS[i % len(COLORS)]}"/>')
        out.append(f'<text x="{lx + 14}" y="{y}">{escape(name)}</text>')
    out.append("</svg>")
    path.write_text("\n".join(out) + "\n")
