# pyexec's display machinery, loaded by pyexec_rt on first use: MIME
# bundles from rich reprs, DataFrame tables, matplotlib figure capture.
import io
import math
import os
import sys

# Images sized for a model: long edge and bytes, as the server shows them.
MAX_EDGE = 1568
MAX_BYTES = 1 << 20
MAX_FIGURES = 32
TABLE_ROWS = 20
TABLE_COLS = 12

_BINARY = {"image/png": "png", "image/jpeg": "jpg", "image/gif": "gif", "application/pdf": "pdf"}
_REPRS = (
    ("_repr_png_", "image/png"),
    ("_repr_jpeg_", "image/jpeg"),
    ("_repr_svg_", "image/svg+xml"),
    ("_repr_html_", "text/html"),
    ("_repr_markdown_", "text/markdown"),
    ("_repr_latex_", "text/latex"),
    ("_repr_json_", "application/json"),
)


def show(obj, state):
    """Record obj as one display event."""
    fig = _as_figure(obj)
    if fig is not None:
        capture_figure(fig, state, "display")
        return
    data = bundle(obj)
    _record(data, state, "display")


def bundle(obj):
    data = {}
    meth = getattr(obj, "_repr_mimebundle_", None)
    if callable(meth):
        try:
            r = meth(include=None, exclude=None)
        except TypeError:
            r = meth()
        except Exception:  # noqa: BLE001
            r = None
        if isinstance(r, tuple):
            r = r[0]
        if isinstance(r, dict):
            data.update(r)
    for name, mime in _REPRS:
        if mime in data:
            continue
        meth = getattr(obj, name, None)
        if not callable(meth):
            continue
        try:
            v = meth()
        except Exception:  # noqa: BLE001 - a broken repr is skipped, as in Jupyter
            continue
        if isinstance(v, tuple):
            v = v[0]
        if v is not None:
            data[mime] = v
    table = dataframe_markdown(obj)
    if table is not None:
        data["text/markdown"] = table
    if "text/plain" not in data:
        try:
            data["text/plain"] = repr(obj)
        except Exception as e:  # noqa: BLE001
            data["text/plain"] = "<unrepresentable %s: %s>" % (type(obj).__name__, e)
    pil = _pil_png(obj)
    if pil is not None:
        data["image/png"] = pil
    return data


def _record(data, state, source, note=None):
    rec = {"kind": "display", "data": {}, "files": {}, "source": source}
    if note:
        rec["note"] = note
    for mime, v in data.items():
        if mime in _BINARY:
            if isinstance(v, str):
                import base64

                try:
                    v = base64.b64decode(v)
                except Exception:  # noqa: BLE001
                    continue
            if not isinstance(v, (bytes, bytearray)):
                continue
            name, path = _rt_new_file(_BINARY[mime])
            with open(path, "wb") as f:
                f.write(v)
            rec["files"][mime] = name
        elif mime == "application/json" and not isinstance(v, str):
            import json

            try:
                rec["data"][mime] = json.dumps(v)
            except Exception:  # noqa: BLE001
                pass
        else:
            rec["data"][mime] = v if isinstance(v, str) else str(v)
    _rt_emit(rec)


def _rt_emit(rec):
    rt_mod().emit(rec)


def _rt_new_file(ext):
    return rt_mod().new_file(ext)


def rt_mod():
    # pyexec_rt is not in sys.modules (it stays out of the run's way); its
    # loader put a handle on it here.
    return globals()["_pyexec_rt"]


def dataframe_markdown(obj, max_rows=TABLE_ROWS, max_cols=TABLE_COLS):
    """A markdown table of a pandas DataFrame or Series, capped at max_rows
    rows (head and tail) and max_cols columns, with its shape stated."""
    mod = type(obj).__module__ or ""
    if not mod.startswith("pandas"):
        return None
    name = type(obj).__name__
    if name == "Series":
        obj = obj.to_frame()
    elif name != "DataFrame":
        return None
    try:
        rows, cols = obj.shape
        head = max_rows // 2
        if rows > max_rows:
            parts = [(obj.iloc[:head], False), (obj.iloc[rows - (max_rows - head):], True)]
        else:
            parts = [(obj, False)]
        shown_cols = list(obj.columns[:max_cols])

        def cell(v):
            s = str(v).replace("|", "\\|").replace("\n", " ")
            return s if len(s) <= 60 else s[:57] + "..."

        header = [cell(obj.index.name or "")] + [cell(c) for c in shown_cols]
        if cols > max_cols:
            header.append("…")
        lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
        for part, after_gap in parts:
            if after_gap:
                lines.append("| " + " | ".join(["…"] * len(header)) + " |")
            sub = part[shown_cols]
            for idx, row in zip(sub.index, sub.itertuples(index=False, name=None)):
                r = [cell(idx)] + [cell(v) for v in row]
                if cols > max_cols:
                    r.append("…")
                lines.append("| " + " | ".join(r) + " |")
        shape = "%d rows × %d columns" % (rows, cols)
        if rows > max_rows or cols > max_cols:
            shape += " (showing %d rows, %d columns)" % (min(rows, max_rows), min(cols, max_cols))
        kind = "Series" if name == "Series" else "DataFrame"
        return "%s\n\n%s: %s" % ("\n".join(lines), kind, shape)
    except Exception:  # noqa: BLE001
        return None


def _pil_png(obj):
    """PIL images: a PNG no larger than the model's bounds."""
    mod = type(obj).__module__ or ""
    if not mod.startswith("PIL.") or not hasattr(obj, "save") or not hasattr(obj, "size"):
        return None
    try:
        im = obj
        if max(im.size) > MAX_EDGE:
            im = im.copy()
            im.thumbnail((MAX_EDGE, MAX_EDGE))
        buf = io.BytesIO()
        if im.mode not in ("RGB", "RGBA", "L", "LA", "P", "1", "I;16"):
            im = im.convert("RGBA")
        im.save(buf, format="PNG")
        return buf.getvalue()
    except Exception:  # noqa: BLE001
        return None


def _as_figure(obj):
    mpl = sys.modules.get("matplotlib.figure")
    if mpl is not None and isinstance(obj, mpl.Figure):
        return obj
    return None


def figure_png(fig):
    """Render fig as PNG at a DPI that keeps its long edge within MAX_EDGE
    pixels and its size within MAX_BYTES (rather than resampling a larger
    image). Returns (png, note)."""
    w, h = fig.get_size_inches()
    dpi = float(fig.dpi)
    longest = max(w, h, 1e-3)
    dpi = min(dpi, (MAX_EDGE - 1) / longest)
    png = _drawn_png(fig, dpi)
    if png is not None and len(png) <= MAX_BYTES:
        return png, None
    png = b""
    for _ in range(4):
        buf = io.BytesIO()
        fig.savefig(buf, format="png", dpi=dpi)
        png = buf.getvalue()
        if len(png) <= MAX_BYTES:
            return png, None
        dpi *= math.sqrt(MAX_BYTES / len(png)) * 0.9
    return png, "the figure stays over %d bytes at %.0f dpi" % (MAX_BYTES, dpi)


def _drawn_png(fig, dpi):
    """The PNG of what fig's Agg canvas last drew, when that is still the
    figure as it stands, at dpi, and what savefig would write: a script that
    saved or drew its figure already paid for the drawing, and encoding the
    canvas skips a second render (most of a capture's cost). None when any
    of that is not so."""
    try:
        agg = sys.modules.get("matplotlib.backends.backend_agg")
        canvas = fig.canvas
        if agg is None or not isinstance(canvas, agg.FigureCanvasAgg) or fig.stale or dpi != float(fig.dpi):
            return None
        renderer = getattr(canvas, "renderer", None)
        if renderer is None or float(renderer.dpi) != dpi:
            return None
        size = (int(renderer.width), int(renderer.height))
        if size != (int(fig.bbox.width), int(fig.bbox.height)):
            return None
        rc = sys.modules["matplotlib"].rcParams
        if rc["savefig.bbox"] is not None or rc["savefig.transparent"] or str(rc["savefig.facecolor"]) != "auto" or str(rc["savefig.edgecolor"]) != "auto":
            return None
        from PIL import Image

        img = Image.frombuffer("RGBA", size, canvas.buffer_rgba(), "raw", "RGBA", 0, 1)
        if fig.patch.get_facecolor()[3] >= 1:
            # An opaque figure has no transparent pixel: RGB halves what
            # zlib compresses, and level 3 is twice as fast as the default
            # for a few percent more bytes.
            img = img.convert("RGB")
        buf = io.BytesIO()
        img.save(buf, format="png", compress_level=3)
        return buf.getvalue()
    except Exception:  # noqa: BLE001 - any surprise falls back to savefig
        return None


def capture_figure(fig, state, source="figure"):
    if state.get("figures", 0) >= MAX_FIGURES:
        if not state.get("figures_note"):
            state["figures_note"] = True
            _rt_emit({"kind": "display", "data": {"text/plain": "[pyexec: more than %d figures; the rest were not captured]" % MAX_FIGURES}, "source": "figure"})
        return
    state["figures"] = state.get("figures", 0) + 1
    png, note = figure_png(fig)
    data = {"image/png": png}
    try:
        label = fig.get_suptitle() if hasattr(fig, "get_suptitle") else ""
        if not label and fig.axes:
            label = fig.axes[0].get_title()
    except Exception:  # noqa: BLE001
        label = ""
    data["text/plain"] = "<Figure %dx%d%s>" % (int(fig.get_figwidth() * fig.dpi), int(fig.get_figheight() * fig.dpi), (": " + label) if label else "")
    _record(data, state, "result" if source == "result" else "figure", note)


def show_result(obj, state):
    """A session cell's last-expression value in rich form, as IPython's
    displayhook shows it: recorded (source "result") when the object offers
    more than its repr (rich reprs, a DataFrame, a PIL image, a matplotlib
    figure). A figure shown this way is closed, so that the cell's end does
    not capture it a second time. Returns whether anything was recorded."""
    fig = _as_figure(obj)
    if fig is not None:
        if not state.get("images"):
            return False
        capture_figure(fig, state, "result")
        plt = sys.modules.get("matplotlib.pyplot")
        if plt is not None:
            try:
                plt.close(fig)
            except Exception:  # noqa: BLE001
                pass
        return True
    data = bundle(obj)
    if len(data) < 2:
        return False
    _record(data, state, "result")
    return True


def capture_open_figures(plt, state):
    if not state.get("images"):
        return
    for num in list(plt.get_fignums()):
        try:
            capture_figure(plt.figure(num), state)
        except Exception as e:  # noqa: BLE001
            sys.stderr.write("[pyexec: capturing figure %s failed: %s]\n" % (num, e))
    plt.close("all")


def patch_module(name, module, state):
    if name == "matplotlib.pyplot":
        _patch_pyplot(module, state)
    elif name in ("IPython.display", "IPython.core.display_functions"):
        module.display = rt_mod().display


def patch_loaded(state):
    for name in ("matplotlib.pyplot", "IPython.display", "IPython.core.display_functions"):
        m = sys.modules.get(name)
        if m is not None:
            patch_module(name, m, state)


def _patch_pyplot(plt, state):
    if getattr(plt.show, "_pyexec", False):
        # Warm: patched in an earlier run of this interpreter; only the
        # exit capture is per run.
        pass
    else:
        orig = plt.show

        def show(*args, **kwargs):
            st = rt_mod()._state
            if st.get("images"):
                capture_open_figures(plt, st)
                backend = str(plt.get_backend()).lower()
                if backend in ("agg", "module://matplotlib_inline.backend_inline") or backend.endswith("agg") and "tk" not in backend and "qt" not in backend and "gtk" not in backend and "wx" not in backend:
                    return None  # nothing to show on a non-interactive backend
            return orig(*args, **kwargs)

        show._pyexec = True
        show.__wrapped__ = orig
        show.__doc__ = orig.__doc__
        plt.show = show
    import atexit

    # Registered now, after pyplot registered its own exit cleanup, so it
    # runs first (atexit is last-in, first-out): open figures are captured
    # before matplotlib closes them.
    atexit.register(_exit_capture, plt)


def _exit_capture(plt):
    st = rt_mod()._state
    if os.getpid() == st.get("pid"):
        capture_open_figures(plt, st)
