// Elementwise add kernels of ext_add_kernel: out[i] = lhs[i] + rhs[i] for i < n.
// `add_kernel` is the float kernel of the custom-CUDA-kernels guide; the others cover the
// remaining dtypes of the op. Self-contained (no headers) so NVRTC compiles it as-is.

#define TENFERRO_ADD(NAME, T)                                                    \
    extern "C" __global__ void NAME(T* out, const T* lhs, const T* rhs, int n) { \
        int i = blockIdx.x * blockDim.x + threadIdx.x;                           \
        if (i < n) {                                                             \
            out[i] = lhs[i] + rhs[i];                                            \
        }                                                                        \
    }

TENFERRO_ADD(add_kernel, float)
TENFERRO_ADD(add_float64, double)
TENFERRO_ADD(add_int32, int)
TENFERRO_ADD(add_uint32, unsigned int)
TENFERRO_ADD(add_int64, long long)

// float16 as raw 16-bit values, added by the hardware's half-precision instruction.
extern "C" __global__ void add_float16(
    unsigned short* out, const unsigned short* lhs, const unsigned short* rhs, int n
) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        unsigned short r;
        asm("add.rn.f16 %0, %1, %2;" : "=h"(r) : "h"(lhs[i]), "h"(rhs[i]));
        out[i] = r;
    }
}
