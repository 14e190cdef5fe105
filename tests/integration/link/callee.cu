// The half of link.cu's device code that defines: a function and a variable the other half
// (caller.cu) uses, compiled separately (-rdc) and joined by the JIT linker at run time.
__device__ int calls = 100;

__device__ float twice(float x)
{
    return 2.0f * x;
}
