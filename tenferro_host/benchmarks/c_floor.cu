// The C floor of an op call: the bench's 1k f32 add launched with cuLaunchKernel from C, on a
// stream of its own, into one kept output (what cuda.core's launch row does from Python). The
// bench builds this with nvcc into a shared library and calls c_floor_launches(k), which makes
// k launches per Python call, so the row's time is the driver's alone (c_floor.py).
#include <cuda.h>
#include <cuda_runtime.h>

extern "C" __global__ void add_kernel(float* out, const float* lhs, const float* rhs, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = lhs[i] + rhs[i];
}

// The driver's functions, resolved through the runtime (no link against libcuda).
typedef CUresult (*launch_fn)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned,
                              unsigned, unsigned, CUstream, void**, void**);
typedef CUresult (*stream_create_fn)(CUstream*, unsigned);
typedef CUresult (*stream_sync_fn)(CUstream);
static launch_fn launch;
static stream_sync_fn stream_sync;
static CUfunction function;
static CUstream stream;
static float *out, *lhs, *rhs;
static int n;
static unsigned grid, block;
static void* params[4];

static cudaError_t entry(const char* name, void** out) {
    cudaDriverEntryPointQueryResult found;
    cudaError_t err = cudaGetDriverEntryPointByVersion(name, out, 12000, cudaEnableDefault, &found);
    if (err == cudaSuccess && found != cudaDriverEntryPointSuccess) err = cudaErrorSymbolNotFound;
    return err;
}

// 0, or the CUDA error of the set-up (the primary context, three buffers, a stream).
extern "C" int c_floor_init(int count, int threads) {
    stream_create_fn stream_create;
    cudaError_t err = cudaFree(0);
    if (err == cudaSuccess) err = entry("cuLaunchKernel", (void**)&launch);
    if (err == cudaSuccess) err = entry("cuStreamCreate", (void**)&stream_create);
    if (err == cudaSuccess) err = entry("cuStreamSynchronize", (void**)&stream_sync);
    if (err == cudaSuccess)
        err = cudaGetFuncBySymbol((cudaFunction_t*)&function, (const void*)add_kernel);
    if (err == cudaSuccess) err = cudaMalloc(&out, count * sizeof(float));
    if (err == cudaSuccess) err = cudaMalloc(&lhs, count * sizeof(float));
    if (err == cudaSuccess) err = cudaMalloc(&rhs, count * sizeof(float));
    if (err != cudaSuccess) return (int)err;
    n = count;
    block = (unsigned)threads;
    grid = (unsigned)((count + threads - 1) / threads);
    params[0] = &out;
    params[1] = &lhs;
    params[2] = &rhs;
    params[3] = &n;
    return (int)stream_create(&stream, CU_STREAM_NON_BLOCKING);
}

// k launches; 0, or the first launch's error.
extern "C" int c_floor_launches(int k) {
    for (int i = 0; i < k; i++) {
        CUresult err = launch(function, grid, 1, 1, block, 1, 1, 0, stream, params, 0);
        if (err != CUDA_SUCCESS) return (int)err;
    }
    return 0;
}

extern "C" int c_floor_sync(void) { return (int)stream_sync(stream); }
