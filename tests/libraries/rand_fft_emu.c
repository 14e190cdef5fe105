/* cuRAND and cuFFT through the stub on the emulated device: what computes and where each
 * stops.
 *
 * cuRAND 13 ships PTX only for compute_121, so the emulated device runs its generators when
 * it reports 12.1 (run.py starts cuda-remoted with --emu-compute-capability 12.1; at 12.0
 * and below the seeding kernel has no PTX it may JIT, and curandGenerate* fails with
 * CURAND_STATUS_LAUNCH_FAILURE). Each generator's output is compared with cuRAND's host
 * generator of the same kind and seed, which produces the same sequence.
 *
 * cuFFT's plans are made (planning walks each module's functions through slot 7 of the
 * driver's tools-module table, which the stub serves with function objects) but its
 * transforms stop: their kernels come as cubins without PTX, which the emulated device
 * cannot run; the launch is refused with cudaErrorNotSupported at the next synchronize, and
 * the server's log names the kernel (CR_EXPECT_LOG, checked by run.py). Both outcomes are
 * asserted, so that any change shows here.
 *
 *   rand_fft_emu      exit 0 when every outcome is as recorded */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime.h>
#include <cufft.h>
#include <curand.h>

#define N 4096

static int failures;

#define EXPECT(cond, ...)                                                                          \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "rand_fft_emu: ");                                                     \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fprintf(stderr, "\n");                                                                 \
            failures++;                                                                            \
        }                                                                                          \
    } while (0)

/* One generator of `type` and `seed` on the device and on the host: uniform floats (bit for
 * bit) and normal floats (within a few ulps: the device may use faster math). */
static void generator(const char *name, curandRngType_t type, unsigned long long seed)
{
    static float dev[N], host[N];
    float *d = NULL;
    curandGenerator_t g = NULL, h = NULL;
    int ok = cudaMalloc((void **)&d, N * sizeof(float)) == cudaSuccess &&
             curandCreateGenerator(&g, type) == CURAND_STATUS_SUCCESS &&
             curandCreateGeneratorHost(&h, type) == CURAND_STATUS_SUCCESS &&
             curandSetPseudoRandomGeneratorSeed(g, seed) == CURAND_STATUS_SUCCESS &&
             curandSetPseudoRandomGeneratorSeed(h, seed) == CURAND_STATUS_SUCCESS;
    EXPECT(ok, "%s: the generators could not be made", name);
    for (int kind = 0; ok && kind < 2; kind++) {
        curandStatus_t s =
            kind ? curandGenerateNormal(g, d, N, 1.0f, 2.0f) : curandGenerateUniform(g, d, N);
        curandStatus_t hs =
            kind ? curandGenerateNormal(h, host, N, 1.0f, 2.0f) : curandGenerateUniform(h, host, N);
        cudaError_t sync = cudaDeviceSynchronize();
        EXPECT(s == CURAND_STATUS_SUCCESS && hs == CURAND_STATUS_SUCCESS && sync == cudaSuccess,
               "%s %s: device %d, host %d, synchronize %d", name, kind ? "normal" : "uniform",
               (int)s, (int)hs, (int)sync);
        if (s != CURAND_STATUS_SUCCESS || sync != cudaSuccess ||
            cudaMemcpy(dev, d, sizeof dev, cudaMemcpyDeviceToHost) != cudaSuccess)
            break;
        int wrong = 0, first = -1;
        for (int i = 0; i < N; i++) {
            float tolerance = kind ? 1e-5f * (1.0f + fabsf(host[i])) : 0.0f;
            if (!(fabsf(dev[i] - host[i]) <= tolerance) && wrong++ == 0)
                first = i;
        }
        EXPECT(!wrong,
               "%s %s: %d of %d values differ from the host generator's (first at %d: "
               "%.9g, host %.9g)",
               name, kind ? "normal" : "uniform", wrong, N, first, first < 0 ? 0 : dev[first],
               first < 0 ? 0 : host[first]);
        if (!wrong)
            printf("%s %s: %d values as the host generator's\n", name, kind ? "normal" : "uniform",
                   N);
    }
    if (g)
        curandDestroyGenerator(g);
    if (h)
        curandDestroyGenerator(h);
    cudaFree(d);
}

int main(void)
{
    generator("XORWOW", CURAND_RNG_PSEUDO_XORWOW, 1234);
    generator("Philox4_32_10", CURAND_RNG_PSEUDO_PHILOX4_32_10, 42);
    generator("MRG32k3a", CURAND_RNG_PSEUDO_MRG32K3A, 7);

    /* cuFFT: plans of each shape are made; a transform stops at its first kernel */
    cufftHandle plan, plan2d;
    cufftResult r = cufftPlan1d(&plan, 256, CUFFT_C2C, 1);
    cufftResult r2 = cufftPlan2d(&plan2d, 64, 64, CUFFT_R2C);
    EXPECT(r == CUFFT_SUCCESS && r2 == CUFFT_SUCCESS, "cufftPlan1d returned %d, cufftPlan2d %d",
           (int)r, (int)r2);
    cufftComplex *data = NULL;
    if (r == CUFFT_SUCCESS && cudaMalloc((void **)&data, 256 * sizeof *data) == cudaSuccess) {
        cufftResult exec = cufftExecC2C(plan, data, data, CUFFT_FORWARD);
        cudaError_t sync = cudaDeviceSynchronize();
        EXPECT(exec == CUFFT_SUCCESS && sync == cudaErrorNotSupported,
               "cufftExecC2C returned %d, then synchronize %d; recorded 0 and %d (no PTX): "
               "record the progress",
               (int)exec, (int)sync, (int)cudaErrorNotSupported);
        printf("cuFFT plans made; the transform stops as recorded (%d)\n", (int)sync);
        printf("CR_EXPECT_LOG no PTX for kernel .*vector_fft\n");
        cudaFree(data);
    }
    if (r == CUFFT_SUCCESS)
        cufftDestroy(plan);
    if (r2 == CUFFT_SUCCESS)
        cufftDestroy(plan2d);
    if (failures)
        fprintf(stderr, "rand_fft_emu: %d outcomes differ from the record\n", failures);
    return failures ? 1 : 0;
}
