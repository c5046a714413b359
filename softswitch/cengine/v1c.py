"""The v1model architecture in C: the per-frame pass loop of
:class:`softswitch.v1model.switch.V1Switch` (parser, checksum verification, ingress,
clone/resubmit/multicast/drop, egress, clone/drop, checksum update, deparser,
recirculate/transmit) over the generated block functions, plus the exported entry points
that :mod:`softswitch.cengine.switch` calls through cffi.

The order of copies and outputs is the Python switch's, so that both engines emit the
same frames in the same order (the equivalence tests hold them to it).
"""

from __future__ import annotations

import logging
from pathlib import Path

from softswitch import ir
from softswitch.cengine.cgen import CGen
from softswitch.cengine.ctypes_gen import c_ident, strip
from softswitch.cengine.errors import CUnsupported
from softswitch.engine.compiled import CompiledProgram

log = logging.getLogger(__name__)

ROLES = ("parser", "verify_checksum", "ingress", "egress", "compute_checksum", "deparser")
MAX_PASSES = 256  # as the Python switch; v1model_loop.c defines the same

# The declarations the Python side (cffi) sees.
CDEF = """
void *ss_new(void);
void ss_free(void *S);
int ss_process(void *S, uint32_t port, const char *frame, uint32_t len, uint64_t now_ns,
               uint64_t t0_ns, char **out);
uint64_t *ss_digests(void *S, uint32_t *nwords);
int ss_table_slots(void *S, int t, uint32_t nwords, const uint64_t *words);
void ss_table_flush(void *S, int t, uint32_t n, const uint64_t *handles, uint64_t *out);
void ss_table_meter(void *S, int t, uint64_t handle, int configured, uint64_t cir,
                    uint64_t cburst, uint64_t pir, uint64_t pburst);
void ss_meter(void *S, int a, uint64_t index, int configured, uint64_t cir, uint64_t cburst,
              uint64_t pir, uint64_t pburst);
int ss_table_load(void *S, int t, uint32_t n, const uint64_t *rows);
void ss_table_default(void *S, int t, uint64_t action, const uint64_t *args, int nargs);
uint64_t *ss_array(void *S, int a);
int ss_pre_load(void *S, uint32_t ngroups, const uint32_t *groups, uint32_t nsessions,
                const uint32_t *sessions);
void ss_seed(void *S, uint64_t seed);
uint64_t ss_stat(void *S, int which);
int ss_loop_new(void *S, uint32_t n, const int *fds, const uint32_t *nums,
                const uint32_t *bufsizes, const uint64_t *edelay, const uint64_t *idelay,
                uint32_t capacity, int32_t cpu_port, double tdf, int needs_clock, uint64_t t0,
                uint64_t *port_ctr, uint64_t *sw_ctr, int use_ring);
int ss_loop_rings(void *S, int tx);
int ss_loop_notify_fd(void *S);
int ss_loop_start(void *S);
void ss_loop_pause(void *S);
void ss_loop_resume(void *S);
void ss_loop_stop(void *S);
uint32_t ss_loop_flush(void *S);
int ss_loop_inject(void *S, uint32_t port, const char *frame, uint32_t len);
uint32_t ss_loop_take(void *S, char **out);
void ss_loop_free(void *S);
"""

_PKT = """
typedef struct {
    const uint8_t *data;
    uint32_t len, pos;
    uint64_t ingress_length;
    int64_t length_reg;
    uint64_t checksum_error;
    uint64_t clone_session; int64_t clone_fl; int has_clone;
    int64_t resubmit_fl; int has_resubmit;
    int64_t recirculate_fl; int has_recirculate;
    uint64_t truncate;
    uint64_t meter_color;
    uint64_t dg_id; uint32_t dg_n; uint64_t dg[64];
    int assert_failed;
    bitbuf_t out;
} pkt_t;
"""


def _field_list_copier(gen: CGen, meta_t: ir.Type) -> str:
    """``fl_copy(idx, d, s)``: the ``@field_list(idx)`` fields of the user metadata."""
    lists: dict[int, list[str]] = {}

    def visit(t: ir.Type, prefix: str) -> None:
        t = strip(t)
        if not isinstance(t, ir.StructType):
            return
        for f in t.fields:
            path = f"{prefix}.f_{c_ident(f.name)}"
            for v in f.annotations.get("field_list", []):
                idx = _annotation_int(gen, v)
                if idx is None:
                    raise CUnsupported(f"@field_list({v!r}) on {f.name}", f.loc)
                lists.setdefault(idx, []).append(f"d->{path[1:]} = s->{path[1:]};")
            if isinstance(strip(f.type), ir.StructType) and "field_list" not in f.annotations:
                visit(f.type, path)

    visit(meta_t, "")
    mt = gen.types.ctype(meta_t)
    body = []
    for idx, stmts in sorted(lists.items()):
        body.append(f"    if (idx == {idx}) {{ " + " ".join(stmts) + " }")
    return (
        f"static void fl_copy(int64_t idx, {mt} *d, const {mt} *s) {{\n"
        + ("\n".join(body) or "    (void)idx; (void)d; (void)s;")
        + "\n}"
    )


def _annotation_int(gen: CGen, v: object) -> int | None:
    if isinstance(v, bool):
        return None
    if isinstance(v, int):
        return v
    if isinstance(v, ir.Expr):
        try:
            return gen.const_value(v)
        except CUnsupported:
            return None
    text = str(v).strip()
    try:
        return int(text, 0)
    except ValueError:
        pass
    if "." in text:
        ename, member = text.rsplit(".", 1)
        t = gen.program.types.get(ename.strip())
        if isinstance(t, ir.EnumType) and member.strip() in t.values:
            return t.values[member.strip()]
    return None


def generate(program: ir.Program, compiled: CompiledProgram) -> tuple[str, CGen]:
    """The whole C source of ``program`` (raises CUnsupported)."""
    gen = CGen(program, compiled)
    params = _gen_blocks(gen, program)
    pp = [p for p in params["parser"] if not isinstance(strip(p.type), ir.ExternType)]
    if len(pp) != 3:
        raise CUnsupported("a v1model parser without (hdr, meta, standard_metadata)")
    hdr_t, meta_t, sm_t = (p.type for p in pp)
    H, M, SM = (gen.types.ctype(t) for t in (hdr_t, meta_t, sm_t))
    sm_fields = {f.name for f in getattr(strip(sm_t), "fields", [])}
    fl = _field_list_copier(gen, meta_t)
    here = Path(__file__).parent  # read here: importlib.resources imports more, on a thread
    loop = here.joinpath("v1model_loop.c").read_text("utf-8")
    loop = loop.replace("HDR_T", H).replace("META_T", M).replace("SM_T", SM)
    loop += "\n" + here.joinpath("io_loop.c").read_text("utf-8")
    opt = _loop_options(gen, sm_fields)
    runtime = here.joinpath("runtime.h").read_text("utf-8")
    state = [
        "typedef struct {",
        f"    table_t tbl[{max(1, len(gen.tables))}];",
        f"    uint64_t *arr[{max(1, len(gen.arrays))}];",
        "    uint64_t rng;",
        "    uint32_t ngroups, nsessions;",
        "    uint32_t *groups;   /* gid, count, then (port, rid) pairs; sorted by gid */",
        "    uint32_t *sessions; /* sid, truncate, count, then (port, rid) pairs */",
        "    uint64_t stats[4];",
        "    uint64_t now_ns;",
        "    uint64_t *dgbuf; uint32_t dg_used, dg_cap;",
        "    char *out; uint32_t out_cap;",
        "    void *loop;  /* the packet loop's thread and ports (io_loop.c), or NULL */",
        "} state_t;",
    ]
    # wide register arrays are typed views of the same words
    typed = []
    for a in gen.arrays:
        if a.kind == "register" and a.width > 64:
            typed.append(f"#define ARR{a.index} ((wide_t *)S->arr[{a.index}])")
    src = "\n".join(
        [
            "/* generated by softswitch.cengine: do not edit */",
            "#define _GNU_SOURCE",
            f"#define WK {gen.types.words}",
            runtime,
            _PKT,
            *gen.types.lines,
            *state,
            *typed,
            "",
        ]
    )
    funcs = [_fix_arrays(f, gen) for f in gen.functions]
    src += (
        "\n\n".join(funcs) + "\n\n" + fl + "\n" + "\n".join(opt) + "\n" + loop + "\n"
        + _new_and_free(gen)
    )
    return src, gen


def _gen_blocks(gen: CGen, program: ir.Program) -> dict[str, list[ir.Param]]:
    """Generate the top-level externs and the six V1Switch blocks; each block's
    parameters by role."""
    if program.main.package != "V1Switch":
        raise CUnsupported(f"package {program.main.package} (only V1Switch)", program.main.loc)
    for inst in program.instances.values():
        if isinstance(inst.type, ir.ExternType):
            g = gen.make_extern(inst, "")
            if g is not None:
                gen.global_names[id(inst)] = g
    args = program.main.args
    if len(args) != len(ROLES):
        raise CUnsupported(f"V1Switch with {len(args)} blocks", program.main.loc)
    params: dict[str, list[ir.Param]] = {}
    for role, inst in zip(ROLES, args, strict=True):
        params[role] = gen.gen_top(role, inst)
    return params


def _loop_options(gen: CGen, sm_fields: set[str]) -> list[str]:
    """The packet loop's compile-time options: the emit buffer's bound and the
    standard_metadata fields this program's v1model has."""
    opt = [f"#define EMIT_BOUND {gen.emit_bound}"]
    for name in ("ingress_global_timestamp", "egress_global_timestamp"):
        if name in sm_fields:
            opt.append(f"#define HAS_{name.upper()} 1")
    if {"enq_timestamp", "deq_timedelta"} <= sm_fields:
        opt.append("#define HAS_QUEUE_FIELDS 1")
    return opt


def _new_and_free(gen: CGen) -> str:
    """``ss_new`` (the state with its arrays and tables set up) and ``ss_free``."""
    arrays = []
    for a in gen.arrays:
        if a.kind == "meter":
            arrays.append(
                f"    S->arr[{a.index}] = (uint64_t *)calloc({max(1, a.size)}, sizeof(meter_t));"
            )
            continue
        words = 2 if a.kind == "counter" else (gen.types.words if a.width > 64 else 1)
        arrays.append(f"    S->arr[{a.index}] = (uint64_t *)calloc({max(1, a.size)} * {words}, 8);")
    tables = []
    for t in gen.tables:
        ranges = ", ".join(str(w if kind == "range" else -1) for w, _, kind in t.key_words) or "-1"
        tables.append(f"    static const int rw{t.index}[] = {{{ranges}}};")
        tables.append(
            f"    S->tbl[{t.index}].kw = {t.kw}; S->tbl[{t.index}].nk = {len(t.key_words)}; "
            f"S->tbl[{t.index}].aw = {t.aw}; S->tbl[{t.index}].rw = {t.row_words}; "
            f"S->tbl[{t.index}].strategy = {t.strategy}; "
            f"S->tbl[{t.index}].range_word = rw{t.index};"
        )
    return (
        "void *ss_new(void) {\n"
        "    state_t *S = (state_t *)calloc(1, sizeof(state_t));\n"
        "    init_hash_tables();\n"
        + "\n".join(arrays + tables)
        + "\n    S->rng = 0x5eed;\n    return S;\n}\n"
        "void ss_free(void *vs) {\n    state_t *S = (state_t *)vs;\n"
        "    ss_loop_free(S);\n"
        + "".join(f"    table_free(&S->tbl[{t.index}]);\n" for t in gen.tables)
        + "".join(f"    free(S->arr[{a.index}]);\n" for a in gen.arrays)
        + "    free(S->groups); free(S->sessions); free(S->out); free(S->dgbuf); free(S);\n}\n"
    )


def _fix_arrays(code: str, gen: CGen) -> str:
    """Wide registers are read through their typed view."""
    for a in gen.arrays:
        if a.kind == "register" and a.width > 64:
            code = code.replace(f"S->arr{a.index}[", f"ARR{a.index}[")
        else:
            code = code.replace(f"S->arr{a.index}[", f"S->arr[{a.index}][")
    return code
