#!/usr/bin/env python3
"""Generates the shim's entry-point tables from the CUDA toolkit.

- hook_list.inc: the driver entry points libmissile.so hooks, with their exact ABI;
- exports.inc: every entry point the driver exports (the shim exports the same set, because it
  stands in for libcuda.so.1), marked hooked, special (cuGetProcAddress*) or forwarded;
- trampolines.S: one exported x86-64 trampoline per entry point, jumping through the shim's
  entry table.

Inputs: the exported symbols of the CUDA toolkit's libcuda stub and the PFN typedefs of
cudaTypedefs.h. For a base name (say cuMemcpyHtoDAsync) the driver exports one symbol per ABI
(cuMemcpyHtoDAsync = 2.0 ABI, cuMemcpyHtoDAsync_v2 = 3.2 ABI) and per stream flavour
(_ptds for synchronous calls, _ptsz for asynchronous ones). cudaTypedefs.h has one typedef per
ABI, PFN_<base>_v<cuda version>[_ptds|_ptsz]. Ordering both by version pairs them up.
ABIs only declared for the driver's own use (__CUDA_API_VERSION_INTERNAL: the 32-bit pre-3.2
forms) are not hooked: they pass through untouched.

usage: gen_hook_list.py CUDA_ROOT OUTPUT_DIR    (ctest runs it with --check to diff)
"""
import re
import subprocess
import sys

FAMILIES = {
    "capacity": ["cuMemGetInfo", "cuDeviceTotalMem"],
    "allocation": ["cuMemAlloc", "cuMemFree", "cuMemAllocPitch", "cuMemAllocManaged",
                   "cuMemGetAddressRange", "cuPointerGetAttribute", "cuPointerGetAttributes"],
    "vmm": ["cuMemCreate", "cuMemRelease", "cuMemAddressReserve", "cuMemAddressFree", "cuMemMap",
            "cuMemUnmap", "cuMemSetAccess", "cuMemExportToShareableHandle",
            "cuMemImportFromShareableHandle", "cuMemRetainAllocationHandle",
            "cuMemGetAllocationPropertiesFromHandle", "cuMemGetAllocationGranularity",
            "cuMemMapArrayAsync"],
    "pool": ["cuMemAllocAsync", "cuMemFreeAsync", "cuMemAllocFromPoolAsync",
             "cuDeviceGetDefaultMemPool", "cuDeviceGetMemPool", "cuDeviceSetMemPool",
             "cuMemPoolCreate", "cuMemPoolDestroy", "cuMemPoolSetAttribute",
             "cuMemPoolGetAttribute", "cuMemPoolTrimTo", "cuMemPoolImportPointer",
             "cuMemPoolExportPointer", "cuMemPoolImportFromShareableHandle",
             "cuMemPoolExportToShareableHandle"],
    "ipc": ["cuIpcGetMemHandle", "cuIpcOpenMemHandle", "cuIpcCloseMemHandle"],
    "pinned": ["cuMemHostAlloc", "cuMemAllocHost", "cuMemFreeHost", "cuMemHostRegister",
               "cuMemHostUnregister", "cuMemHostGetDevicePointer"],
    "copy": ["cuMemcpy", "cuMemcpyAsync", "cuMemcpyHtoD", "cuMemcpyDtoH", "cuMemcpyDtoD",
             "cuMemcpyHtoDAsync", "cuMemcpyDtoHAsync", "cuMemcpyDtoDAsync", "cuMemcpyPeer",
             "cuMemcpyPeerAsync", "cuMemcpy2D", "cuMemcpy2DUnaligned", "cuMemcpy2DAsync",
             "cuMemcpy3D", "cuMemcpy3DAsync", "cuMemcpy3DPeer", "cuMemcpy3DPeerAsync",
             "cuMemcpyHtoA", "cuMemcpyAtoH", "cuMemcpyHtoAAsync", "cuMemcpyAtoHAsync",
             "cuMemcpyDtoA", "cuMemcpyAtoD", "cuMemcpyAtoA", "cuMemcpyBatchAsync",
             "cuMemcpy3DBatchAsync", "cuMemPrefetchAsync", "cuMemAdvise"],
    "launch": ["cuLaunchKernel", "cuLaunchKernelEx", "cuLaunchCooperativeKernel", "cuGraphLaunch"],
    "sync": ["cuStreamSynchronize", "cuCtxSynchronize", "cuEventSynchronize"],
    # A program that polls for its work instead of waiting (pacing_hooks.h, RunQueried).
    "query": ["cuStreamQuery", "cuEventQuery"],
    # A BE tenant's graphs are split into pieces at instantiation (graph_split.h); an instance
    # changed afterwards launches whole.
    "graph": ["cuGraphInstantiate", "cuGraphInstantiateWithFlags", "cuGraphInstantiateWithParams",
              "cuGraphExecDestroy", "cuGraphUpload", "cuGraphExecUpdate",
              "cuGraphExecKernelNodeSetParams", "cuGraphExecMemcpyNodeSetParams",
              "cuGraphExecMemsetNodeSetParams", "cuGraphExecHostNodeSetParams",
              "cuGraphExecChildGraphNodeSetParams", "cuGraphExecEventRecordNodeSetEvent",
              "cuGraphExecEventWaitNodeSetEvent", "cuGraphExecExternalSemaphoresSignalNodeSetParams",
              "cuGraphExecExternalSemaphoresWaitNodeSetParams", "cuGraphExecBatchMemOpNodeSetParams",
              "cuGraphExecNodeSetParams", "cuGraphNodeSetEnabled"],
    "memset": ["cuMemsetD8", "cuMemsetD16", "cuMemsetD32", "cuMemsetD2D8", "cuMemsetD2D16",
               "cuMemsetD2D32", "cuMemsetD8Async", "cuMemsetD16Async", "cuMemsetD32Async",
               "cuMemsetD2D8Async", "cuMemsetD2D16Async", "cuMemsetD2D32Async"],
}

# Typedefs in the driver-internal section whose ABI is already 64-bit clean: the CUDA runtime
# still asks for these versions (cudart 13 requests cuIpcOpenMemHandle at 4010), so they are
# hooked like the public ones. Every other internal typedef is a 32-bit pre-3.2 ABI.
INTERNAL_64BIT = {("cuMemHostRegister", 4000), ("cuIpcOpenMemHandle", 4010),
                  ("cuGraphInstantiate", 10000), ("cuGraphInstantiate", 11000)}

# Hooked by hand (they hand out the hooks): see proc_address.cc.
SPECIAL = ["cuGetProcAddress", "cuGetProcAddress_v2"]

SPLIT = re.compile(r"^(?P<base>cu\w+?)(?:_v(?P<abi>\d+))?(?P<flavour>_ptds|_ptsz)?$")
TYPEDEF = re.compile(r"typedef\s+CUresult\s+\(CUDAAPI\s+\*PFN_(?P<base>cu\w+?)_v(?P<ver>\d+)"
                     r"(?P<flavour>_ptds|_ptsz)?\)")


def exported_symbols(stub):
    out = subprocess.run(["nm", "-D", "--defined-only", stub], check=True, capture_output=True,
                         text=True).stdout
    return sorted(line.split()[-1] for line in out.splitlines() if line.split()[-1].startswith("cu"))


def typedefs(header):
    public, internal = {}, {}
    in_internal = False
    for line in open(header):
        if "#if defined(__CUDA_API_VERSION_INTERNAL)" in line:
            in_internal = True
        elif in_internal and line.startswith("#endif"):
            in_internal = False
        m = TYPEDEF.search(line)
        if m:
            key = (m["base"], m["flavour"] or "")
            (internal if in_internal else public).setdefault(key, []).append(int(m["ver"]))
    return public, internal


def main():
    check = "--check" in sys.argv
    args = [a for a in sys.argv[1:] if a != "--check"]
    cuda_root, outdir = args
    exports = exported_symbols(f"{cuda_root}/lib64/stubs/libcuda.so")
    public, internal = typedefs(f"{cuda_root}/include/cudaTypedefs.h")
    family_of = {base: fam for fam, bases in FAMILIES.items() for base in bases}

    # Group exports by (base, flavour), ordered by ABI number (no suffix = 1).
    groups = {}
    for sym in exports:
        m = SPLIT.match(sym)
        if not m or m["base"] not in family_of:
            continue
        key = (m["base"], m["flavour"] or "")
        groups.setdefault(key, []).append((int(m["abi"] or 1), sym))

    rows, missing = [], []
    for (base, flavour), syms in sorted(groups.items()):
        syms.sort()
        versions = sorted(internal.get((base, flavour), []) + public.get((base, flavour), []))
        if len(versions) != len(syms):
            missing.append(f"{base}{flavour}: exports {[s for _, s in syms]} vs typedef versions {versions}")
            continue
        for (_, sym), ver in zip(syms, versions):
            if ver in internal.get((base, flavour), []) and (base, ver) not in INTERNAL_64BIT:
                continue  # legacy 32-bit ABI: passes through
            rows.append((family_of[base], sym, f"PFN_{base}_v{ver}{flavour}"))
    for base in family_of:
        if not any(k[0] == base for k in groups):
            missing.append(f"{base}: not exported by this driver stub")
    if missing:
        sys.stderr.write("gen_hook_list: cannot pair:\n  " + "\n  ".join(missing) + "\n")
        return 1

    rows.sort(key=lambda r: (list(FAMILIES).index(r[0]), r[1]))
    hooked = {sym for _, sym, _ in rows}
    header = ["// Generated by gen_hook_list.py from the CUDA toolkit's libcuda stub and cudaTypedefs.h.",
              "// Do not edit: run `libintercept/gen_hook_list.py /usr/local/cuda libintercept`."]
    files = {}
    files["hook_list.inc"] = header + ["// MISSILE_HOOK(exported symbol, ABI typedef, family)"] + [
        f"MISSILE_HOOK({sym}, {pfn}, {fam})" for fam, sym, pfn in rows]
    exports_lines = header + ["// MISSILE_EXPORT_<kind>(index, exported symbol)"]
    asm = [line.replace("//", "#") for line in header] + [
        "# One trampoline per driver entry point: r11 = index, then jump through the entry table.",
        "# The table starts with hooks, special wrappers or the lazy forwarder (hooks.cc).",
        "#if !defined(__x86_64__)", "#error libmissile trampolines are written for x86-64", "#endif",
        "        .text", "        .hidden missile_entry_table"]
    for idx, sym in enumerate(exports):
        kind = "SPECIAL" if sym in SPECIAL else "HOOKED" if sym in hooked else "FORWARD"
        exports_lines.append(f"MISSILE_EXPORT_{kind}({idx}, {sym})")
        asm += [f"        .globl {sym}", f"        .type {sym}, @function", "        .p2align 4",
                f"{sym}:", f"        movl ${idx}, %r11d",
                f"        jmpq *missile_entry_table+{idx * 8}(%rip)", f"        .size {sym}, .-{sym}"]
    asm.append('        .section .note.GNU-stack,"",@progbits')
    files["exports.inc"] = exports_lines
    files["trampolines.S"] = asm
    for special in SPECIAL:
        if special not in exports:
            sys.stderr.write(f"gen_hook_list: {special} is not exported by the stub\n")
            return 1

    stale = []
    for name, lines in files.items():
        text = "\n".join(lines) + "\n"
        path = f"{outdir}/{name}"
        if check:
            try:
                current = open(path).read()
            except FileNotFoundError:
                current = None
            if current != text:
                stale.append(path)
        else:
            open(path, "w").write(text)
    if stale:
        sys.stderr.write("out of date with the CUDA toolkit, regenerate: " + " ".join(stale) + "\n")
        return 1
    print(f"{len(rows)} hooks, {len(exports)} exported entry points: " +
          ("in sync" if check else f"written to {outdir}"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
