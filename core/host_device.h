// NNLAB_HOST_DEVICE marks a small function that compiles for the host and for CUDA kernels
// alike (nvcc, and the CUDA simulator's host build), so the two devices share one formula and
// give bit-identical results where it is used (core/philox.h, core/pixels.h).
#pragma once

#if defined(__CUDACC__)
#define NNLAB_HOST_DEVICE __host__ __device__ __forceinline__
#else
#define NNLAB_HOST_DEVICE inline
#endif
