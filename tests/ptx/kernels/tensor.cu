// wmma: 16x16x16 tiles, half inputs, float and half accumulators, both layouts.
#include <cuda_fp16.h>
#include <mma.h>
using namespace nvcuda;

extern "C" __global__ void mma_f32(const __half *A, const __half *B, float *C)
{
    wmma::fragment<wmma::matrix_a, 16, 16, 16, __half, wmma::row_major> a;
    wmma::fragment<wmma::matrix_b, 16, 16, 16, __half, wmma::col_major> b;
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
    wmma::load_matrix_sync(acc, C, 16, wmma::mem_col_major);
    wmma::load_matrix_sync(a, A, 16);
    wmma::load_matrix_sync(b, B, 16);
    wmma::mma_sync(acc, a, b, acc);
    for (int i = 0; i < acc.num_elements; i++)
        acc.x[i] *= 2.0f; // element-wise, whatever the layout
    wmma::store_matrix_sync(C, acc, 16, wmma::mem_col_major);
}

extern "C" __global__ void mma_f16(const __half *A, const __half *B, __half *C)
{
    wmma::fragment<wmma::matrix_a, 16, 16, 16, __half, wmma::col_major> a;
    wmma::fragment<wmma::matrix_b, 16, 16, 16, __half, wmma::row_major> b;
    wmma::fragment<wmma::accumulator, 16, 16, 16, __half> acc;
    wmma::fill_fragment(acc, __float2half(1.0f));
    wmma::load_matrix_sync(a, A, 16);
    wmma::load_matrix_sync(b, B, 16);
    wmma::mma_sync(acc, a, b, acc);
    wmma::store_matrix_sync(C, acc, 16, wmma::mem_row_major);
}
