#!/usr/bin/env python3
"""Regenerates entry_points.inc: every ABI variant of each entry point the fake implements.

Usage: gen_entry_points.py [CUDA_ROOT] > entry_points.inc
Versions come from the PFN_<name>_v<version>[_ptds|_ptsz] typedefs of cudaTypedefs.h. Exported
names follow the driver's rule, checked against the stub's exports: the oldest ABI keeps the plain
name, the next ones are _v2, _v3...; a per-thread variant carries the name of the newest plain ABI
at or below its version plus _ptds/_ptsz. IMPLEMENTED lists what the fake defines.
"""
import re, sys
import subprocess
CUDA = sys.argv[1] if len(sys.argv) > 1 else '/usr/local/cuda'
hdr = open(CUDA + '/include/cudaTypedefs.h').read()
stub = set(line.split()[-1] for line in subprocess.run(
    ['nm', '-D', '--defined-only', CUDA + '/lib64/stubs/libcuda.so'],
    capture_output=True, text=True, check=True).stdout.splitlines() if line.strip())
IMPLEMENTED = """cuInit cuDriverGetVersion cuDeviceGetCount cuDeviceGet cuDeviceGetName cuDeviceGetUuid cuDeviceGetUuid_v2
cuDeviceGetAttribute cuDeviceTotalMem_v2 cuDevicePrimaryCtxRetain cuDevicePrimaryCtxRelease_v2 cuDevicePrimaryCtxGetState
cuDevicePrimaryCtxSetFlags_v2 cuDevicePrimaryCtxReset_v2 cuCtxCreate_v2 cuCtxCreate_v3 cuCtxCreate_v4 cuCtxDestroy_v2
cuCtxSetCurrent cuCtxGetCurrent cuCtxPushCurrent_v2 cuCtxPopCurrent_v2 cuCtxGetDevice cuCtxGetDevice_v2 cuCtxSynchronize
cuCtxSynchronize_v2 cuGetErrorString cuGetErrorName
cuMemAlloc_v2 cuMemFree_v2 cuMemAllocPitch_v2 cuMemGetInfo_v2 cuMemGetAddressRange_v2 cuPointerGetAttribute
cuPointerGetAttributes cuMemAllocHost_v2 cuMemHostAlloc cuMemFreeHost cuMemHostRegister_v2 cuMemHostUnregister
cuMemHostGetDevicePointer_v2
cuMemGetAllocationGranularity cuMemCreate cuMemRelease cuMemAddressReserve cuMemAddressFree cuMemMap cuMemUnmap
cuMemSetAccess cuMemGetAccess cuMemExportToShareableHandle cuMemImportFromShareableHandle cuMemRetainAllocationHandle
cuMemGetAllocationPropertiesFromHandle
cuStreamCreate cuStreamCreateWithPriority cuStreamDestroy_v2 cuStreamSynchronize cuStreamSynchronize_ptsz cuStreamQuery
cuStreamQuery_ptsz cuStreamIsCapturing cuStreamIsCapturing_ptsz cuStreamWaitEvent cuStreamWaitEvent_ptsz cuLaunchHostFunc cuLaunchHostFunc_ptsz cuStreamAddCallback
cuStreamAddCallback_ptsz cuStreamWriteValue32 cuStreamWriteValue32_ptsz cuStreamWriteValue32_v2 cuStreamWriteValue32_v2_ptsz
cuStreamWaitValue32 cuStreamWaitValue32_ptsz cuStreamWaitValue32_v2 cuStreamWaitValue32_v2_ptsz
cuStreamWriteValue64 cuStreamWriteValue64_ptsz cuStreamWriteValue64_v2 cuStreamWriteValue64_v2_ptsz
cuStreamWaitValue64 cuStreamWaitValue64_ptsz cuStreamWaitValue64_v2 cuStreamWaitValue64_v2_ptsz
cuEventCreate cuEventRecord cuEventRecord_ptsz cuEventQuery cuEventSynchronize cuEventElapsedTime cuEventElapsedTime_v2
cuEventDestroy_v2
cuMemcpy cuMemcpy_ptds cuMemcpyAsync cuMemcpyAsync_ptsz cuMemcpyHtoD_v2 cuMemcpyHtoD_v2_ptds cuMemcpyDtoH_v2
cuMemcpyDtoH_v2_ptds cuMemcpyDtoD_v2 cuMemcpyDtoD_v2_ptds cuMemcpyHtoDAsync_v2 cuMemcpyHtoDAsync_v2_ptsz
cuMemcpyDtoHAsync_v2 cuMemcpyDtoHAsync_v2_ptsz cuMemcpyDtoDAsync_v2 cuMemcpyDtoDAsync_v2_ptsz cuMemcpyPeer
cuMemcpyPeer_ptds cuMemcpyPeerAsync cuMemcpyPeerAsync_ptsz cuMemcpy2D_v2 cuMemcpy2D_v2_ptds cuMemcpy2DUnaligned_v2
cuMemcpy2DUnaligned_v2_ptds cuMemcpy2DAsync_v2 cuMemcpy2DAsync_v2_ptsz cuMemcpy3D_v2 cuMemcpy3D_v2_ptds
cuMemcpy3DAsync_v2 cuMemcpy3DAsync_v2_ptsz cuArrayCreate_v2 cuArrayDestroy cuMemcpyHtoA_v2 cuMemcpyHtoA_v2_ptds
cuMemcpyAtoH_v2 cuMemcpyAtoH_v2_ptds cuMemcpyHtoAAsync_v2 cuMemcpyHtoAAsync_v2_ptsz cuMemcpyAtoHAsync_v2
cuMemcpyAtoHAsync_v2_ptsz
cuMemsetD8_v2 cuMemsetD8_v2_ptds cuMemsetD16_v2 cuMemsetD16_v2_ptds cuMemsetD32_v2 cuMemsetD32_v2_ptds
cuMemsetD8Async cuMemsetD8Async_ptsz cuMemsetD16Async cuMemsetD16Async_ptsz cuMemsetD32Async cuMemsetD32Async_ptsz
cuMemsetD2D8_v2 cuMemsetD2D8_v2_ptds cuMemsetD2D16_v2 cuMemsetD2D16_v2_ptds cuMemsetD2D32_v2 cuMemsetD2D32_v2_ptds
cuMemsetD2D8Async cuMemsetD2D8Async_ptsz cuMemsetD2D16Async cuMemsetD2D16Async_ptsz cuMemsetD2D32Async cuMemsetD2D32Async_ptsz
cuMemAllocAsync cuMemAllocAsync_ptsz cuMemFreeAsync cuMemFreeAsync_ptsz cuMemAllocFromPoolAsync cuMemAllocFromPoolAsync_ptsz
cuDeviceGetDefaultMemPool cuDeviceGetMemPool cuDeviceSetMemPool cuMemPoolCreate cuMemPoolDestroy cuMemPoolSetAttribute
cuMemPoolGetAttribute cuMemPoolTrimTo cuGetProcAddress cuGetProcAddress_v2 cuGetExportTable
cuModuleLoadData cuModuleGetFunction cuModuleUnload cuLaunchKernel cuLaunchKernel_ptsz cuLaunchKernelEx
cuLaunchKernelEx_ptsz cuLaunchCooperativeKernel cuLaunchCooperativeKernel_ptsz
cuStreamBeginCapture cuStreamBeginCapture_ptsz cuStreamBeginCapture_v2 cuStreamBeginCapture_v2_ptsz cuStreamEndCapture
cuStreamEndCapture_ptsz cuStreamGetCaptureInfo cuStreamGetCaptureInfo_ptsz cuStreamGetCaptureInfo_v2
cuStreamGetCaptureInfo_v2_ptsz cuStreamGetCaptureInfo_v3 cuStreamGetCaptureInfo_v3_ptsz cuGraphInstantiate
cuGraphInstantiate_v2 cuGraphInstantiateWithFlags cuGraphLaunch cuGraphLaunch_ptsz cuGraphExecDestroy cuGraphDestroy
cuGraphGetNodes cuGraphCreate cuGraphAddKernelNode_v2 cuGraphAddMemsetNode cuGraphAddHostNode cuGraphAddEmptyNode
cuGraphAddEventRecordNode cuGraphAddEventWaitNode cuGraphAddChildGraphNode cuGraphAddNode_v2 cuGraphDestroyNode
cuGraphNodeGetType cuGraphChildGraphNodeGetGraph cuGraphGetEdges cuGraphGetEdges_v2 cuGraphClone cuGraphNodeFindInClone
cuGraphInstantiateWithParams cuGraphInstantiateWithParams_ptsz cuGraphUpload cuGraphUpload_ptsz cuGraphExecGetFlags
cuGraphExecKernelNodeSetParams_v2 cuGraphExecUpdate_v2 cuGraphAddDependencies cuGraphAddDependencies_v2
cuThreadExchangeStreamCaptureMode"""
impl = IMPLEMENTED.split()
impl_set = set(impl)
assert len(impl) == len(impl_set)
for n in impl: assert n in stub, n
HEADER = """\
// GENERATED by gen_entry_points.py from /usr/local/cuda/include/cudaTypedefs.h (CUDA 13.0) and the
// export list of the toolkit's libcuda stub. Edit the script's IMPLEMENTED list, not this file.
//
// One row per ABI variant of every driver entry point the fake implements at least one variant of:
//   FAKECUDA_IMPL(base, exported_name, cuda_version, suffix)    the fake defines exported_name
//   FAKECUDA_NOIMPL(base, exported_name, cuda_version, suffix)  the driver has it, the fake not
// cuda_version is the version of the PFN_<base>_v<version><suffix> typedef (the ABI), suffix is
// empty, _ptds or _ptsz. cuGetProcAddress selects among these rows; entry_points.h declares every
// FAKECUDA_IMPL row with exactly its PFN type, so a definition with another ABI does not compile.
"""

def base_of(name):
    b = re.sub(r'_(ptds|ptsz)$', '', name)
    b = re.sub(r'_v\d+$', '', b)
    return b
bases = []
for n in impl:
    b = base_of(n)
    if b not in bases: bases.append(b)
rows = []
sys.stdout.write(HEADER)
covered = set()
for b in bases:
    vers = re.findall(r'PFN_%s_v(\d+)(_ptds|_ptsz)?\)' % b, hdr)
    plain = sorted(set(int(v) for v, s in vers if not s))
    names = {}
    for i, v in enumerate(plain):
        names[v] = b if i == 0 else '%s_v%d' % (b, i + 1)
    out = []
    for v in plain:
        out.append((b, names[v], v, ''))
    for v, s in vers:
        if not s: continue
        v = int(v)
        # the per-thread variant of the newest plain ABI at or below its version
        cands = [p for p in plain if p <= v]
        nm = (names[max(cands)] if cands else b) + s
        out.append((b, nm, v, s))
    for (bb, nm, v, s) in out:
        if nm not in stub: print('MISSING IN STUB', nm, file=sys.stderr)
        rows.append((bb, nm, v, s, nm in impl_set))
        covered.add(nm)
for n in impl:
    if n not in covered: print('NOT COVERED', n, file=sys.stderr)
for bb, nm, v, s, im in rows:
    print('%s(%s, %s, %d, %s)' % ('FAKECUDA_IMPL' if im else 'FAKECUDA_NOIMPL', bb, nm, v, s))
