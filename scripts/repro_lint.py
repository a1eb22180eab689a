#!/usr/bin/env python3
"""repro_lint: checks that SPIR-V modules keep to the reproducible mode.

Usage: scripts/repro_lint.py MODULE.spv...   (needs spirv-dis: Debian's
spirv-tools). Prints one line per breach, naming the module, the instruction
and the result id, and exits 1 if there is any (2 if a module cannot be read).

A reproducible shader may use only floating-point add, subtract and multiply
that carry NoContraction (GLSL `precise`), exact operations (negation,
compares, selects, conversions, integer and bit operations) and the exact
GLSL.std.450 instructions listed in EXACT_EXT; each entry point declares
SignedZeroInfNanPreserve and RoundingModeRTE for 32-bit floats. Everything
whose bits a driver may choose is refused: OpFDiv and OpFRem/OpFMod (2.5 ULP),
OpDot and matrix and cooperative-matrix arithmetic (no fixed order),
exp/log/pow/sqrt/inversesqrt/tanh and the other transcendental built-ins, fma
(fused or not at the driver's choice), fmin/fmax/fclamp/mix (NaN handling or
contraction undefined), subgroup float arithmetic and float atomics."""
import re
import subprocess
import sys

# Multiplications and additions that must carry NoContraction.
CONTRACTIBLE = {"OpFAdd", "OpFSub", "OpFMul", "OpVectorTimesScalar"}

FORBIDDEN = {
    "OpFDiv": "division is 2.5 ULP: use repro_div",
    "OpFRem": "remainder inherits division's error",
    "OpFMod": "remainder inherits division's error",
    "OpDot": "dot product has no fixed order",
    "OpMatrixTimesScalar": "matrix arithmetic has no fixed order",
    "OpVectorTimesMatrix": "matrix arithmetic has no fixed order",
    "OpMatrixTimesVector": "matrix arithmetic has no fixed order",
    "OpMatrixTimesMatrix": "matrix arithmetic has no fixed order",
    "OpOuterProduct": "matrix arithmetic has no fixed order",
    "OpFmaKHR": "fused multiply-add must be used by every device or none",
    "OpAtomicFAddEXT": "float atomics have no fixed order",
    "OpAtomicFMinEXT": "float atomics have no fixed order",
    "OpAtomicFMaxEXT": "float atomics have no fixed order",
    "OpGroupFAdd": "subgroup float arithmetic has no fixed order",
    "OpGroupFMin": "subgroup float arithmetic has no fixed order",
    "OpGroupFMax": "subgroup float arithmetic has no fixed order",
}
FORBIDDEN_PREFIXES = {
    "OpCooperativeMatrix": "cooperative-matrix arithmetic has no fixed order",
    "OpTypeCooperativeMatrix": "cooperative-matrix arithmetic has no fixed order",
    "OpGroupNonUniformF": "subgroup float arithmetic has no fixed order",
    "OpGroupNonUniformQuadF": "subgroup float arithmetic has no fixed order",
}

# GLSL.std.450 instructions whose result is exact (or integer).
EXACT_EXT = {
    "Round", "RoundEven", "Trunc", "FAbs", "SAbs", "FSign", "SSign", "Floor",
    "Ceil", "Fract", "UMin", "SMin", "UMax", "SMax", "UClamp", "SClamp",
    "Step", "Frexp", "FrexpStruct", "Ldexp", "FindILsb", "FindSMsb",
    "FindUMsb", "PackHalf2x16", "UnpackHalf2x16", "PackSnorm4x8",
    "PackUnorm4x8", "PackSnorm2x16", "PackUnorm2x16", "UnpackSnorm2x16",
    "UnpackUnorm2x16", "UnpackSnorm4x8", "UnpackUnorm4x8",
}

REQUIRED_MODES = ("SignedZeroInfNanPreserve 32", "RoundingModeRTE 32")


def lint(path):
    try:
        text = subprocess.run(["spirv-dis", "--no-color", path], check=True,
                              capture_output=True, text=True).stdout
    except FileNotFoundError:
        print("repro_lint: error: spirv-dis not found (apt-get install spirv-tools)", file=sys.stderr)
        sys.exit(2)
    except subprocess.CalledProcessError as e:
        print(f"repro_lint: error: {path}: spirv-dis failed: {e.stderr.strip()}", file=sys.stderr)
        sys.exit(2)
    problems = []
    no_contraction = set()
    glsl_std = set()
    entries = []
    modes = {}
    ops = []
    for line in text.splitlines():
        line = line.split(";")[0].strip()
        m = re.match(r"(?:(%\S+) = )?(Op\w+)(.*)", line)
        if not m:
            continue
        result, op, rest = m.group(1), m.group(2), m.group(3).split()
        if op == "OpDecorate" and len(rest) >= 2 and rest[1] == "NoContraction":
            no_contraction.add(rest[0])
        elif op == "OpExtInstImport" and '"GLSL.std.450"' in m.group(3):
            glsl_std.add(result)
        elif op == "OpEntryPoint":
            entries.append(rest[1])
        elif op in ("OpExecutionMode", "OpExecutionModeId"):
            modes.setdefault(rest[0], []).append(" ".join(rest[1:]))
        ops.append((result, op, rest))
    for result, op, rest in ops:
        where = f"{path}: {result or ''} {op}".replace("  ", " ")
        if op in CONTRACTIBLE and result not in no_contraction:
            problems.append(f"{where}: lacks NoContraction (declare the result `precise`)")
        if op in FORBIDDEN:
            problems.append(f"{where}: forbidden: {FORBIDDEN[op]}")
        for prefix, why in FORBIDDEN_PREFIXES.items():
            if op.startswith(prefix):
                problems.append(f"{where}: forbidden: {why}")
        if op == "OpExtInst" and len(rest) >= 3 and rest[1] in glsl_std and rest[2] not in EXACT_EXT:
            problems.append(f"{where} {rest[2]}: forbidden: GLSL.std.450 {rest[2]} is not exact: "
                            "use the repro_math routines")
    if not entries:
        problems.append(f"{path}: no entry point")
    for entry in entries:
        for mode in REQUIRED_MODES:
            if mode not in modes.get(entry, []):
                problems.append(f"{path}: entry point {entry} does not declare {mode.split()[0]} "
                                "(include repro_math.glsl)")
    return problems


def main():
    if len(sys.argv) < 2:
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    problems = []
    for path in sys.argv[1:]:
        problems += lint(path)
    for p in problems:
        print(p)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
