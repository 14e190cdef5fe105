// Calls to real functions (not inlined): arguments, struct results, recursion, local arrays,
// divergent calls, a barrier inside a called function.
struct Pair {
    int a;
    double b;
};

__device__ __noinline__ Pair make_pair(int x, double y)
{
    Pair p;
    p.a = x * 3;
    p.b = y + x;
    return p;
}

__device__ __noinline__ int fact(int n)
{
    return n <= 1 ? 1 : n * fact(n - 1);
}

__device__ __noinline__ int fib(int n)
{
    return n < 2 ? n : fib(n - 1) + fib(n - 2);
}

__device__ __noinline__ int sum_local(int n)
{
    int arr[16];
    for (int i = 0; i < 16; i++)
        arr[i] = i * n;
    int s = 0;
    for (int i = n % 16; i < 16; i++)
        s += arr[i];
    return s;
}

__device__ __noinline__ int with_barrier(int *sh, int v)
{
    sh[threadIdx.x] = v;
    __syncthreads();
    return sh[(threadIdx.x + 1) % blockDim.x];
}

extern "C" __global__ void calls(int *out)
{
    __shared__ int sh[64];
    int t = threadIdx.x;
    Pair p = make_pair(t, 0.5);
    int *o = out + t * 6;
    o[0] = p.a + (int)(p.b * 2);
    o[1] = fact(t % 10);
    o[2] = (t % 4 == 0) ? fib(t % 13) : -1; // divergent call
    o[3] = sum_local(t);
    o[4] = with_barrier(sh, t * t);
    o[5] = fib(10);
}

// Calls through pointers: a table indexed per thread (lanes of a warp call different
// functions), and a pointer passed as an argument.
typedef int (*op_fn)(int, int);
__device__ __noinline__ int op_add(int a, int b) { return a + b; }
__device__ __noinline__ int op_sub(int a, int b) { return a - b; }
__device__ __noinline__ int op_mul(int a, int b) { return a * b; }
__device__ op_fn table[3] = {op_add, op_sub, op_mul};

extern "C" __global__ void pointers(int *out)
{
    int t = threadIdx.x;
    op_fn f = table[t % 3];
    out[t] = f(t, 7) + table[(t + 1) % 3](t, 2);
}
