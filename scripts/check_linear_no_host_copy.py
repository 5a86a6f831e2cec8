#!/usr/bin/env python3
"""Static check (no GPU): the quantized linear's per-call paths copy nothing between host and device and do
not synchronize.

The per-call paths are QuantLinear::run (cuda/src/quant_linear.cpp), the C API's resident linear
(cuda_linear_resident in lib/src/gptq/capi/qgru_gptq_cuda.cpp) and every function of the files whose kernels they
launch (cuda/src/quant_linear_stripes.cu, quant_linear_wgmma.cu, stripe_column_sum.cuh, stripe_kernel_entry.cuh,
quant_linear_kernels.cu, layout_convert.cu). Their bodies must not
contain a host<->device copy (cudaMemcpy*, DeviceBuffer::from / upload / download / to_vector, an uploader),
a synchronization (cudaStreamSynchronize, cudaDeviceSynchronize, cudaEventSynchronize) or a host-side repack
(repack_stripes, capi_to_checkpoint, download_rows). The GPU self-test checks the same at run time with
qgru::cuda::host_transfer_count(); this check keeps it true on machines without a GPU.

Usage: scripts/check_linear_no_host_copy.py [source-root]     --self-test: shows the check catches a copy.
"""
import pathlib
import re
import sys

FORBIDDEN = [r"\bcudaMemcpy\w*", r"\bcudaStreamSynchronize\b", r"\bcudaDeviceSynchronize\b", r"\bcudaEventSynchronize\b",
             r"DeviceBuffer::from\b", r"\.upload\(", r"\.download\(", r"\bto_vector\b", r"Uploader\b",
             r"\brepack_stripes\b", r"\bcapi_to_checkpoint\b", r"\bdownload_rows\b", r"\brun_host\b"]

# (file, function name or None for the whole file)
PER_CALL = [("cuda/src/quant_linear.cpp", "QuantLinear::run"),
            ("lib/src/gptq/capi/qgru_gptq_cuda.cpp", "cuda_linear_resident"),
            ("cuda/src/quant_linear_stripes.cu", None),
            ("cuda/src/quant_linear_wgmma.cu", None),
            ("cuda/src/stripe_column_sum.cuh", None),
            ("cuda/src/stripe_kernel_entry.cuh", None),
            ("cuda/src/quant_linear_kernels.cu", None),
            ("cuda/src/layout_convert.cu", None)]


def strip_comments(text):
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    return re.sub(r"//[^\n]*", "", text)


def function_body(text, name):
    """The body (between its braces) of the first definition of `name` (a line starting with a return type)."""
    m = re.search(r"^[^\n;{}]*\b" + re.escape(name) + r"\s*\([^;{]*\)\s*(const\s*)?\{", text, flags=re.M)
    if not m:
        return None
    depth, start = 0, m.end() - 1
    for i in range(start, len(text)):
        depth += {"{": 1, "}": -1}.get(text[i], 0)
        if depth == 0:
            return text[start:i + 1]
    return None


def problems(root):
    found = []
    for rel, name in PER_CALL:
        path = root / rel
        if not path.exists():
            found.append(f"{rel}: missing")
            continue
        text = strip_comments(path.read_text())
        body = text if name is None else function_body(text, name)
        if body is None:
            found.append(f"{rel}: no definition of {name}")
            continue
        for pattern in FORBIDDEN:
            for hit in re.finditer(pattern, body):
                found.append(f"{rel}: {name or 'file'} contains '{hit.group(0)}' (a per-call path must not copy or synchronize)")
    return found


def self_test(root):
    import tempfile
    with tempfile.TemporaryDirectory() as tmp:
        fake = pathlib.Path(tmp)
        for rel, _ in PER_CALL:
            (fake / rel).parent.mkdir(parents=True, exist_ok=True)
            (fake / rel).write_text((root / rel).read_text())
        assert not problems(fake), problems(fake)
        path = fake / "cuda/src/quant_linear.cpp"
        text = path.read_text()
        marker = "auto* base = static_cast<unsigned char*>(workspace);"  # inside QuantLinear::run only
        assert marker in text, "QuantLinear::run changed: update the self-test's marker"
        path.write_text(text.replace(marker, marker + "\n  QGRU_CUDA_CHECK(cudaStreamSynchronize(nullptr));", 1))
        caught = problems(fake)
        assert any("cudaStreamSynchronize" in p for p in caught), caught
        path.write_text(text.replace("void QuantLinear::run(", "void QuantLinear::walk(", 1))
        assert any("no definition" in p for p in problems(fake)), "a renamed function must be reported"
    print("check_linear_no_host_copy self-test: OK")
    return 0


def main(argv):
    args = [a for a in argv if a != "--self-test"]
    root = pathlib.Path(args[0] if args else pathlib.Path(__file__).resolve().parent.parent)
    if "--self-test" in argv:
        return self_test(root)
    found = problems(root)
    for p in found:
        print(f"check_linear_no_host_copy: {p}", file=sys.stderr)
    if found:
        return 1
    print(f"check_linear_no_host_copy: OK ({len(PER_CALL)} per-call paths, no host copy, no synchronization)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
