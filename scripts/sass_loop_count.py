#!/usr/bin/env python3
"""Static SASS census of a kernel's main loop: how many instructions its tile loop issues, and how much of that is
64-bit integer index arithmetic (divisions above all). No GPU needed; it reads machine code, it times nothing.

    sass_loop_count.py [--kernel REGEX] INPUT...          INPUT: a cubin, an object or executable with device code
                                                          (anything `cuobjdump -sass` reads), or a text file that
                                                          holds `cuobjdump -sass` output
    sass_loop_count.py --compile SRC [--arch 80,90] ...   compiles SRC like scripts/check_cuda_spills.sh does
                                                          (nvcc -cubin -std=c++17 --expt-relaxed-constexpr, the
                                                          include folders of the checkout SRC is in) and counts
                                                          each cubin

cuobjdump: --cuobjdump PATH, else $CUOBJDUMP, else PATH, else /tmp/cubin-tools/nvidia/cu13/bin (the PyPI package
nvidia-cuda-cuobjdump installed with `pip install --target /tmp/cubin-tools nvidia-cuda-cuobjdump`).

What it counts, per kernel whose (mangled or demangled) name matches --kernel (default: stripe_linear_kernel):
  total        every instruction of the function as cuobjdump prints it (its local subroutines included),
               NOPs of the trailing padding excluded; with the division calls (see `div calls`) and MUFU.RCP
               (inline division paths, and one in each division subroutine) of the whole function
  loop         the tile loop: the backward branch with the largest span (head = its target, body = every
               instruction from the head to that branch, inclusive); `static` = instructions in the body, rare
               paths (the end of a column, the reduction) included
  div calls    CALL instructions in the body whose callee is a subroutine (reached straight on, ends in RET) that
               divides (holds a MUFU.RCP): the 64-bit division/remainder routine the compiler emits for int64 `/`
               and `%`; each callee's size is listed below the table. (A CALL whose target ends in EXIT or jumps
               away is the compiler reaching an out-of-line block; it is not counted.)
  rcp          MUFU.RCP in the body: one per inline division path (the compiler's fast path for an int64 `/` or
               `%` whose operands fit in 32 bits, or a 32-bit division by a value unknown at compile time)
  wide         IMAD.WIDE / IMAD.WIDE.U32 in the body (32 x 32 -> 64-bit multiply-adds: 64-bit addresses, indices)
  carry        instructions in the body that take or make a carry for the high word of a 64-bit value: .X forms
               (IADD3.X, IMAD.X, LEA.HI.X, ...) and .EX compares (ISETP ... .EX)
  path         the fewest instructions one warp can issue in one iteration of the body: the shortest path from
               the head to the back-edge that passes at least the --through counts of the named opcodes (default
               HMMA=16,LDGSTS=3: the 16 mma.sync of a W4A16 tile, its two 16-byte weight copies and one of A per
               thread; give LDGSTS=5 for W8A16; an instruction guarded by @!PT, such as the `@!PT LDS RZ, [RZ]`
               placeholders the compiler puts beside cp.async, never executes and does not count toward them,
               though it costs its issue slot like any other), forward edges only (a loop inside the body counts once), a CALL
               costing 1 + the callee's shortest path to its RET. A lower bound on a steady-state tile: the
               cheapest branch at every fork (no group-parameter load, no end of column, the 32-bit fast path of
               each division). --show-path prints it.
  no timing    a count of issued instructions is not a time: stalls, memory and the other warps are not in it

--loops adds a table of EVERY loop of each kernel (one row per backward branch, by head address, its nesting depth
= how many other loops' bodies hold it): static size, the fewest instructions one iteration issues (forward edges,
no --through), division calls, MUFU.RCP, every MUFU, IMAD.WIDE, carry ops, local memory (LDL/STL), global loads and
stores, shared loads, shuffles, dp4a (IDP) and barriers (BAR), and `path through`: the fewest instructions one iteration issues passing the
--through counts of those opcodes the loop's body holds (e.g. --through IDP=2,STG=3: a dot-product loop whose
lane does two dp4a, a cell loop that stores three results, an outer loop that does both once); for kernels whose work is several loops inside an
outer one (the persistent GRU kernel: a time loop holding the dot-product loop and the cell loop).
--span FROM:TO (opcode prefixes) adds, for the outer loop, the fewest instructions from its LAST instruction
matching FROM, through the back-edge and the head, to its FIRST instruction matching TO (e.g. RED:IDP: from a grid
barrier's arrival to the next step's first dp4a), each side's shortest path counted as `path` is.
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile

INSTRUCTION = re.compile(r"^\s*/\*([0-9a-f]{4,})\*/\s+(.*?)\s*;")
TARGET = re.compile(r"0x([0-9a-f]+)")


class Instruction:
    def __init__(self, address, text):
        self.address = address
        self.text = text
        tokens = text.replace(",", " , ").split()
        self.guard = tokens[0] if tokens and tokens[0].startswith("@") else ""
        rest = tokens[1:] if self.guard else tokens
        self.opcode = rest[0] if rest else ""
        self.base = self.opcode.split(".")[0]
        self.operands = " ".join(rest[1:])
        self.target = None
        if self.base in ("BRA", "CALL", "JMP", "JMXU", "BRX") and TARGET.search(self.operands):
            self.target = int(TARGET.findall(self.operands)[-1], 16)

    @property
    def unconditional_guard(self):
        return self.guard in ("", "@PT")

    @property
    def ends_flow(self):
        """No fall-through: an unconditional jump, EXIT or RET."""
        if not self.unconditional_guard:
            return False
        if self.base in ("EXIT", "RET", "JMP"):
            return True
        if self.base == "BRA":
            # `BRA P2, 0x...` / `BRA !P2, ...` branch on a predicate operand, `BRA.DIV UR4, 0x...` only when the
            # warp has diverged (to an out-of-line copy of a shuffle or vote): they fall through otherwise
            return not (re.match(r"!?U?P[0-9T]", self.operands) or ".DIV" in self.opcode)
        return False


def read_functions(text):
    functions, name = {}, None
    for line in text.splitlines():
        if "Function :" in line:
            name = line.split("Function :", 1)[1].strip()
            functions[name] = []
            continue
        m = INSTRUCTION.match(line)
        if m and name is not None:
            functions[name].append(Instruction(int(m.group(1), 16), m.group(2)))
    return functions


def demangle(names):
    tool = shutil.which("c++filt")
    if not tool or not names:
        return {n: n for n in names}
    out = subprocess.run([tool], input="\n".join(names), capture_output=True, text=True, check=True).stdout.splitlines()
    return dict(zip(names, out)) if len(out) == len(names) else {n: n for n in names}


def shortest_path(code, begin, end, cost, required=None, trace=None):
    """Fewest cost units from code[begin] to code[end] inclusive, forward edges only, passing at least n
    instructions of opcode op for each op: n in `required`; None when no such path exists. `trace` (a list)
    receives the path's instructions."""
    required = list((required or {}).items())
    index = {ins.address: i for i, ins in enumerate(code)}
    inf = float("inf")
    # state: the counts reached so far of each required opcode, capped at the requirement
    full = tuple(n for _, n in required)

    def passed(counts, ins):
        executes = ins.guard != "@!PT"
        return tuple(min(n, c + (ins.base == op and executes)) for (op, n), c in zip(required, counts))

    dist = [dict() for _ in range(len(code))]
    previous = {}
    start = passed(tuple(0 for _ in required), code[begin])
    dist[begin][start] = cost(code[begin])
    for i in range(begin, end):
        ins = code[i]
        for counts, d in list(dist[i].items()):
            successors = []
            if not ins.ends_flow:
                successors.append(i + 1)
            if ins.base == "BRA" and ins.target is not None and ins.target in index and index[ins.target] > i:
                successors.append(index[ins.target])
            for j in successors:
                if j > end:
                    continue
                ncounts = passed(counts, code[j])
                nd = d + cost(code[j])
                if nd < dist[j].get(ncounts, inf):
                    dist[j][ncounts] = nd
                    previous[(j, ncounts)] = (i, counts)
    best = dist[end].get(full, inf)
    if best == inf:
        return None
    if trace is not None:
        at = (end, full)
        while at is not None:
            trace.append(code[at[0]])
            at = previous.get(at)
        trace.reverse()
    return int(best)


def census(code, through, trace=None):
    code = [ins for ins in code if ins.base != "NOP"] if code else code
    index = {ins.address: i for i, ins in enumerate(code)}
    result = {"total": len(code)}
    backward = [(i, index[ins.target]) for i, ins in enumerate(code)
                if ins.base == "BRA" and ins.target is not None and ins.target in index and index[ins.target] < i]
    if not backward:
        result["loop"] = None
        return result
    back, head = max(backward, key=lambda pair: pair[0] - pair[1])
    body = code[head:back + 1]

    def subroutine(address):
        """(size, has MUFU.RCP) of the subroutine at `address`: straight on from its entry to a RET, or None when an
        EXIT or an unconditional jump comes first (the compiler also uses CALL to reach out-of-line blocks)."""
        start = index.get(address)
        if start is None:
            return None
        for i in range(start, len(code)):
            if code[i].base == "RET":
                return i - start + 1, any(ins.opcode.startswith("MUFU.RCP") for ins in code[start:i + 1]), i
            if code[i].ends_flow:
                return None
        return None

    callee_cost = {}

    def subroutine_cost(address):
        if address not in callee_cost:
            found = subroutine(address)
            callee_cost[address] = shortest_path(code, index[address], found[2], lambda ins: 1) if found else 0
        return callee_cost[address]

    def cost(ins):
        return 1 + (subroutine_cost(ins.target) if ins.base == "CALL" and ins.target is not None else 0)

    calls = [ins for ins in body if ins.base == "CALL" and ins.target is not None and subroutine(ins.target)]
    division_calls = [ins for ins in calls if subroutine(ins.target)[1]]
    callees = sorted({ins.target for ins in calls})
    every_call = [ins for ins in code if ins.base == "CALL" and ins.target is not None and subroutine(ins.target)]
    result.update(
        kernel_division_calls=sum(1 for ins in every_call if subroutine(ins.target)[1]),
        kernel_rcp=sum(1 for ins in code if ins.opcode.startswith("MUFU.RCP")),
        loop={"head": code[head].address, "back_edge": code[back].address},
        static=len(body),
        calls=len(calls),
        division_calls=len(division_calls),
        callees={f"{a:#x}": {"size": subroutine(a)[0], "division": subroutine(a)[1], "shortest": subroutine_cost(a)}
                 for a in callees},
        rcp=sum(1 for ins in body if ins.opcode.startswith("MUFU.RCP")),
        wide=sum(1 for ins in body if ins.opcode.startswith("IMAD.WIDE")),
        carry=sum(1 for ins in body if re.search(r"\.X(\.|$)", ins.opcode) or ".EX" in ins.opcode),
        path=shortest_path(code, head, back, cost, through, trace),
        path_any=shortest_path(code, head, back, cost),
    )
    return result


LOOP_COUNTS = (("div calls", None), ("MUFU.RCP", "MUFU.RCP"), ("MUFU", "MUFU"), ("IMAD.WIDE", "IMAD.WIDE"),
               ("carry", None), ("LDL/STL", None), ("LDG", "LDG"), ("STG", "STG"), ("LDS", "LDS"), ("SHFL", "SHFL"),
               ("IDP", "IDP"), ("BAR", "BAR"))


def every_loop(code, through):
    """One row per backward branch of `code` (NOPs dropped), by head address: its span, nesting depth and counts,
    `path` with no requirement and `through` with the --through counts of the opcodes the body holds."""
    code = [ins for ins in code if ins.base != "NOP"]
    index = {ins.address: i for i, ins in enumerate(code)}
    spans = [(index[ins.target], i) for i, ins in enumerate(code)
             if ins.base == "BRA" and ins.target is not None and ins.target in index and index[ins.target] < i]
    callee_cost = {}

    def cost(ins):
        """1, plus a called subroutine's shortest path to its RET (as `path` counts a CALL)."""
        if ins.base != "CALL" or ins.target not in index:
            return 1
        if ins.target not in callee_cost:
            routine = _straight_subroutine(code, index, ins.target)
            callee_cost[ins.target] = (shortest_path(code, index[ins.target], index[routine[-1].address],
                                                     lambda x: 1) if routine else 0)
        return 1 + callee_cost[ins.target]

    rows = []
    for head, back in sorted(spans):
        body = code[head:back + 1]
        depth = sum(1 for h, b in spans if (h, b) != (head, back) and h <= head and back <= b)
        counts = {}
        for label, prefix in LOOP_COUNTS:
            if label == "div calls":
                counts[label] = sum(1 for ins in body if ins.base == "CALL" and ins.target in index and any(
                    x.opcode.startswith("MUFU.RCP") for x in _straight_subroutine(code, index, ins.target)))
            elif label == "carry":
                counts[label] = sum(1 for ins in body if re.search(r"\.X(\.|$)", ins.opcode) or ".EX" in ins.opcode)
            elif label == "LDL/STL":
                counts[label] = sum(1 for ins in body if ins.base in ("LDL", "STL"))
            else:
                counts[label] = sum(1 for ins in body if ins.opcode.startswith(prefix))
        held = {op: n for op, n in through.items() if any(ins.base == op for ins in body)}
        rows.append({"head": code[head].address, "back_edge": code[back].address, "depth": depth,
                     "static": len(body), "path": shortest_path(code, head, back, cost),
                     "through": shortest_path(code, head, back, cost, held) if held else None,
                     "held": held, "counts": counts})
    return rows


def _straight_subroutine(code, index, address):
    """The instructions of the subroutine at `address` up to its RET; [] when an EXIT or a jump comes first."""
    start = index[address]
    for i in range(start, len(code)):
        if code[i].base == "RET":
            return code[start:i + 1]
        if code[i].ends_flow:
            return []
    return []


def span_around(code, from_prefix, to_prefix):
    """Fewest instructions from the outer loop's last FROM instruction to its back-edge, plus from its head to its
    first TO instruction (the head and the back-edge once each); None when either is missing."""
    code = [ins for ins in code if ins.base != "NOP"]
    index = {ins.address: i for i, ins in enumerate(code)}
    backward = [(i, index[ins.target]) for i, ins in enumerate(code)
                if ins.base == "BRA" and ins.target is not None and ins.target in index and index[ins.target] < i]
    if not backward:
        return None
    back, head = max(backward, key=lambda pair: pair[0] - pair[1])
    sources = [i for i in range(head, back + 1) if code[i].opcode.startswith(from_prefix)]
    targets = [i for i in range(head, back + 1) if code[i].opcode.startswith(to_prefix)]
    if not sources or not targets:
        return None
    def cost(ins):
        routine = _straight_subroutine(code, index, ins.target) if ins.base == "CALL" and ins.target in index else []
        return 1 + (shortest_path(code, index[ins.target], index[routine[-1].address], lambda x: 1) if routine else 0)

    tail = shortest_path(code, sources[-1], back, cost)
    lead = shortest_path(code, head, targets[0], cost)
    if tail is None or lead is None:
        return None
    return tail + lead


def find_cuobjdump(explicit):
    for candidate in (explicit, os.environ.get("CUOBJDUMP"), shutil.which("cuobjdump"),
                      "/tmp/cubin-tools/nvidia/cu13/bin/cuobjdump"):
        if candidate and os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    sys.exit("sass_loop_count: no cuobjdump (give --cuobjdump, set CUOBJDUMP, or "
             "pip install --target /tmp/cubin-tools nvidia-cuda-cuobjdump)")


def sass_text(path, cuobjdump):
    with open(path, "rb") as f:
        head = f.read(4)
    if head == b"\x7fELF" or path.endswith((".cubin", ".o", ".a", ".so", ".fatbin")):
        run = subprocess.run([find_cuobjdump(cuobjdump), "-sass", path], capture_output=True, text=True)
        if run.returncode != 0:
            sys.exit(f"sass_loop_count: cuobjdump -sass {path} failed: {run.stderr.strip()}")
        return run.stdout
    with open(path, encoding="utf-8", errors="replace") as f:
        return f.read()


def compile_cubins(source, arches, nvcc, scratch):
    # the include folders of the checkout the source belongs to (.../cuda/src/X.cu), else of this script's
    src_dir = os.path.dirname(os.path.abspath(source))
    root = os.path.dirname(os.path.dirname(src_dir))
    if not os.path.isdir(os.path.join(root, "lib", "include")):
        root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    out = []
    for arch in arches:
        cubin = os.path.join(scratch, f"{os.path.basename(source)}.sm_{arch}.cubin")
        cmd = [nvcc, "-cubin", f"-arch=sm_{arch}", "-std=c++17", "--expt-relaxed-constexpr",
               f"-I{root}/lib/include", f"-I{root}/cuda/include", f"-I{root}/cuda/src", "-o", cubin, source]
        run = subprocess.run(cmd, capture_output=True, text=True)
        if run.returncode != 0:
            sys.exit(f"sass_loop_count: nvcc failed on {source} for sm_{arch}:\n{run.stderr}")
        out.append(cubin)
    return out


def arch_of(text):
    m = re.search(r"code for (sm_[0-9a-z]+)", text) or re.search(r"EF_CUDA_SM([0-9]+[a-z]?)", text)
    if not m:
        return "?"
    return m.group(1) if m.group(1).startswith("sm_") else "sm_" + m.group(1).lower()


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("inputs", nargs="*", help="cubin / object / cuobjdump -sass text")
    parser.add_argument("--compile", metavar="SRC", help="compile this .cu to cubins first")
    parser.add_argument("--arch", default="80,90", help="with --compile: comma-separated SM versions")
    parser.add_argument("--nvcc", default=shutil.which("nvcc") or "/usr/local/cuda/bin/nvcc")
    parser.add_argument("--cuobjdump")
    parser.add_argument("--kernel", default="stripe_linear_kernel", help="regex on the function name")
    parser.add_argument("--show-path", action="store_true", help="print the instructions of each `path`")
    parser.add_argument("--through", default="HMMA=16,LDGSTS=3",
                        help="`path` passes at least N instructions of each OPCODE: OPCODE=N,... (default %(default)s)")
    parser.add_argument("--loops", action="store_true", help="also list every loop of each kernel (see above)")
    parser.add_argument("--span", metavar="FROM:TO",
                        help="also count the fewest instructions from the outer loop's last FROM around to its first TO")
    args = parser.parse_args()
    if args.span and ":" not in args.span:
        parser.error(f"--span {args.span}: expected FROM:TO (opcode prefixes)")
    if not args.inputs and not args.compile:
        parser.error("give an INPUT or --compile SRC")

    through = {}
    for item in filter(None, args.through.split(",")):
        op, _, n = item.partition("=")
        if not n.isdigit():
            parser.error(f"--through {args.through}: expected OPCODE=N,...")
        through[op.strip()] = int(n)

    with tempfile.TemporaryDirectory(prefix="sass_loop_count.") as scratch:
        inputs = list(args.inputs)
        if args.compile:
            inputs += compile_cubins(args.compile, [a.strip() for a in args.arch.split(",") if a.strip()], args.nvcc,
                                     scratch)
        rows = []
        for path in inputs:
            text = sass_text(path, args.cuobjdump)
            # cuobjdump prints one section per architecture of a fat binary: split at its headers
            sections = re.split(r"(?m)^(?=\s*code for sm_)", text) if "code for sm_" in text else [text]
            for section in sections:
                functions = read_functions(section)
                names = demangle(list(functions))
                for name, code in functions.items():
                    shown = names[name]
                    if not (re.search(args.kernel, name) or re.search(args.kernel, shown)):
                        continue
                    shown = re.sub(r"qgru::cuda::\(anonymous namespace\)::", "", shown)
                    shown = re.sub(r"\(qgru::cuda::StripeLinearArgs\)", "", shown)
                    trace = [] if args.show_path else None
                    c = census(code, through, trace)
                    if args.loops:
                        c["every_loop"] = every_loop(code, through)
                    if args.span:
                        c["span"] = span_around(code, *args.span.split(":", 1))
                    rows.append((arch_of(section), shown, c))
                    if trace:
                        print(f"# {arch_of(section)} {shown}: the {len(trace)} instructions of `path`")
                        for ins in trace:
                            print(f"#   {ins.address:#06x}  {ins.text}")
        if not rows:
            sys.exit(f"sass_loop_count: no function matching '{args.kernel}' in {', '.join(inputs)}")

    print("| arch | kernel | total | div calls / MUFU.RCP in kernel | loop static | loop path (min) "
          "| div calls in loop | MUFU.RCP in loop | IMAD.WIDE in loop | carry ops in loop |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for arch, name, c in rows:
        if c.get("loop") is None:
            print(f"| {arch} | `{name}` | {c['total']} | | no loop | | | | | |")
            continue
        print(f"| {arch} | `{name}` | {c['total']} | {c['kernel_division_calls']} / {c['kernel_rcp']} | {c['static']} "
              f"| {c['path']} | {c['division_calls']} | {c['rcp']} "
              f"| {c['wide']} | {c['carry']} |")
    for arch, name, c in rows:
        if c.get("loop"):
            callees = ", ".join(f"{a} ({v['size']} instructions, {v['shortest']} on its shortest path"
                                f"{', divides' if v['division'] else ''})"
                                for a, v in c["callees"].items()) or "none"
            print(f"{arch} {name}: loop head {c['loop']['head']:#x}, back-edge {c['loop']['back_edge']:#x}; "
                  f"callees {callees}; shortest iteration without the --through counts {c['path_any']}")
    if args.span:
        for arch, name, c in rows:
            print(f"{arch} {name}: fewest instructions from the outer loop's last {args.span.split(':')[0]} to its "
                  f"first {args.span.split(':')[1]} (around the back-edge): {c.get('span')}")
    if args.loops:
        labels = [label for label, _ in LOOP_COUNTS]
        print()
        print("| arch | kernel | loop (head-back edge) | depth | static | path (min) | path through | "
              + " | ".join(labels) + " |")
        print("|---|---|---|---|---|---|---|" + "---|" * len(labels))
        for arch, name, c in rows:
            short = re.sub(r"\(.*", "", name)
            for loop in c.get("every_loop", []):
                held = ",".join(f"{op}={n}" for op, n in loop["held"].items())
                through_cell = f"{loop['through']} ({held})" if held else ""
                print(f"| {arch} | `{short}` | {loop['head']:#x}-{loop['back_edge']:#x} | {loop['depth']} "
                      f"| {loop['static']} | {loop['path']} | {through_cell} | "
                      + " | ".join(str(loop['counts'][l]) for l in labels) + " |")


if __name__ == "__main__":
    main()
