#!/usr/bin/env python3
"""Reads Fig. 5a and Fig. 5b off the authors' SC'21 talk, from its vector drawing.

The slides of the ZeRO-Infinity talk at SC'21 are in DeepSpeed's repository
(docs/assets/files/SC21-ZeRO-Infinity.pdf). Page 15 ("Excellent Efficiency")
is Fig. 5a: TFLOPS per GPU on 512 V100s for ZeRO-Infinity at 0.5T to 20T and
for 3D parallelism at 0.5T. Page 16 ("Super-linear Scalability") is Fig. 5b:
PFLOPS of the 1T model on 64 to 512 GPUs. Both charts are vector drawings, so
each bar's height and each marker's position are numbers in the PDF, not
pixels: this script converts pages 15 and 16 to SVG with poppler's pdftocairo
and measures them against the charts' own gridlines (0-60 TFLOPS in steps of
10 on page 15; 0-30 PFLOPS in steps of 5, 64-512 GPUs in steps of 64, on page
16: the axis labels are glyph outlines, so their values are written here).

Usage: papers/zero-infinity/talk-figures.py path/to/SC21-ZeRO-Infinity.pdf
Needs pdftocairo (Debian: poppler-utils). Exit 2 on a missing file or tool, 1
when a chart does not have the shapes described above.
"""
import re
import shutil
import subprocess
import sys
import tempfile

ORANGE = "94.099426%,56.498718%,31.399536%"  # 3D parallelism's bars
BLUE = "45.098877%,66.699219%,85.899353%"    # ZeRO-Infinity's bars and markers
GRID = "85.099792%,85.099792%,85.099792%"    # the gridlines
AXIS = "74.899292%,74.899292%,74.899292%"    # Fig. 5b's axis lines and ticks
NUM = re.compile(r"-?\d+(?:\.\d+)?")


def paths(svg):
    """(style, points) of every <path>, points in the PDF's y-up frame."""
    height = float(re.search(r'height="([\d.]+)pt"', svg).group(1))
    out = []
    for m in re.finditer(r"<path ([^>]*)/>", svg):
        attrs = m.group(1)
        style = re.search(r'style="([^"]*)"', attrs)
        d = re.search(r' d="([^"]*)"', attrs)
        if not style or not d:
            continue
        nums = [float(x) for x in NUM.findall(d.group(1))]
        pts = list(zip(nums[0::2], nums[1::2]))
        # pdftocairo writes stroked shapes in the PDF's own frame under a flip,
        # filled ones already flipped into the SVG's y-down frame.
        if "matrix(1,0,0,-1,0," not in attrs:
            pts = [(x, height - y) for x, y in pts]
        out.append((style.group(1), pts))
    return out


def straight(ps, colour, along):
    """The point lists of the paths stroked in `colour` whose every segment
    keeps coordinate `along` constant: horizontal lines (along=1) or
    vertical ones (along=0)."""
    return [pts for style, pts in ps if f"stroke:rgb({colour})" in style and len(pts) >= 2 and all(
        abs(pts[i][along] - pts[i + 1][along]) < 0.01 for i in range(0, len(pts) - 1, 2))]


def grid(ps, along):
    """The gridlines' positions: their y (along=1, horizontal lines) or x
    (along=0, vertical), from the one gray path of such segments."""
    for pts in straight(ps, GRID, along):
        if len(pts) >= 8:
            return sorted({round(p[along], 3) for p in pts})
    raise ValueError("no " + ("horizontal" if along else "vertical") + " gridlines")


def fig5a(svg):
    ps = paths(svg)
    grid_y = grid(ps, 1)  # 10, 20, ..., 60 TFLOPS
    if len(grid_y) != 6:
        raise ValueError(f"page 15: {len(grid_y)} gridlines, expected 6")
    bars = []
    for style, pts in ps:
        for colour, name in ((ORANGE, "3D parallelism"), (BLUE, "ZeRO-Infinity")):
            if f"fill:rgb({colour})" in style and "stroke:" not in style.replace("stroke:none", ""):
                xs, ys = [p[0] for p in pts], [p[1] for p in pts]
                if max(xs) - min(xs) > 15:  # the legend's squares are 7.5 pt wide
                    bars.append((min(xs), name, min(ys), max(ys)))
    base = min(b[2] for b in bars)
    per_tflop = (grid_y[-1] - base) / 60.0
    models = ["0.5T", "1T", "5T", "10T", "20T"]
    zi = sorted(b for b in bars if b[1] == "ZeRO-Infinity")
    d3 = sorted(b for b in bars if b[1] == "3D parallelism")
    if len(zi) != 5 or len(d3) != 5:
        raise ValueError(f"page 15: {len(zi)} ZeRO-Infinity and {len(d3)} 3D bars, expected 5 each")
    print("Fig. 5a (talk page 15), TFLOPS per GPU on 512 V100s:")
    print("| model | ZeRO-Infinity | 3D parallelism |")
    print("|---|---|---|")
    for m, z, t in zip(models, zi, d3):
        tv = (t[3] - t[2]) / per_tflop
        # the chart draws a stub of 1 TFLOPS under a red cross where 3D parallelism cannot run
        tcell = f"{tv:.1f}" if tv > 2 else "does not fit (stub)"
        print(f"| {m} | {(z[3] - z[2]) / per_tflop:.1f} | {tcell} |")


def fig5b(svg):
    ps = paths(svg)
    grid_y = grid(ps, 1)  # 5, 10, ..., 30 PFLOPS
    grid_x = grid(ps, 0)  # 128, 192, ..., 512 GPUs
    # the axis lines: single segments (the ticks are paths of many)
    axis = [pts[0][1] for pts in straight(ps, AXIS, 1) if len(pts) == 2]
    yaxis = [pts[0][0] for pts in straight(ps, AXIS, 0) if len(pts) == 2]
    if len(grid_y) != 6 or len(grid_x) != 7 or not axis or not yaxis:
        raise ValueError("page 16: the axes are not as described")
    y0, x0 = min(axis), min(yaxis)
    per_pflop = (grid_y[-1] - y0) / 30.0
    per_gpu = (grid_x[-1] - x0) / 448.0
    print("Fig. 5b (talk page 16), the 1T model's measured throughput:")
    print("| GPUs | PFLOPS | TFLOPS per GPU |")
    print("|---|---|---|")
    for style, pts in ps:
        if f"fill:rgb({BLUE})" in style and len(pts) > 6:  # a marker: a filled circle
            xs, ys = [p[0] for p in pts], [p[1] for p in pts]
            cx, cy = (min(xs) + max(xs)) / 2, (min(ys) + max(ys)) / 2
            gpus = 64 + (cx - x0) / per_gpu
            if abs(gpus / 64 - round(gpus / 64)) > 0.05:
                continue  # the legend's marker
            n, pf = 64 * round(gpus / 64), (cy - y0) / per_pflop
            print(f"| {n} | {pf:.2f} | {1000 * pf / n:.1f} |")


def main():
    if len(sys.argv) != 2:
        print(next(p for p in __doc__.split("\n\n") if p.startswith("Usage:")), file=sys.stderr)
        return 2
    tool = shutil.which("pdftocairo")
    if not tool:
        print("talk-figures: pdftocairo not found (apt-get install poppler-utils)", file=sys.stderr)
        return 2
    pages = {}
    with tempfile.TemporaryDirectory() as tmp:
        for page in (15, 16):
            out = f"{tmp}/p{page}.svg"
            r = subprocess.run([tool, "-svg", "-f", str(page), "-l", str(page), sys.argv[1], out],
                               capture_output=True, text=True)
            if r.returncode != 0:
                print(f"talk-figures: {sys.argv[1]}: {r.stderr.strip()}", file=sys.stderr)
                return 2
            with open(out) as f:
                pages[page] = f.read()
    try:
        fig5a(pages[15])
        print()
        fig5b(pages[16])
    except ValueError as e:
        print(f"talk-figures: {sys.argv[1]}: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
