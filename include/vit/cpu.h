// What this CPU offers the engine, as oneDNN sees it: its instruction set and the lower precisions'
// instructions, and each precision's matmul ceiling. A header of its own, standard types only, so that
// the engine, the library and programs that report on the machine (vit bench, vit inspect) share it.
#pragma once
#include <string>

#include "vit/precision.h"

namespace vit {

// The instruction set oneDNN runs with (its ONEDNN_MAX_CPU_ISA cap honoured, unlike cpuid) and what it
// offers the lower precisions.
struct CpuIsa {
  std::string name;  // "avx2", "avx512_core_vnni", ...
  bool bf16;         // bf16 dot products: avx512_bf16 or AMX
  bool vnni;         // u8 x s8 dot products summed in 32 bits: avx512_vnni, avx2_vnni or AMX
};
CpuIsa cpu_isa();

// The ceiling a precision's matmuls are measured against: GOP/s (2 x multiply-adds per second) of one
// large oneDNN matmul, 3152 x 768 x 3072 (ViT-B/16's fc1 at batch 16), weights in the layout it asks for,
// on the threads in force, from its best of at least 3 runs and half a second. F32: f32 x f32; BF16: bf16 x
// bf16 summed in f32; Int8: u8 x s8 summed in s32 (the engine's int8 product). gops 0 where oneDNN cannot
// create that matmul here.
struct MatmulPeak {
  double gops = 0;
  std::string impl;  // oneDNN's kernel ("brg:avx512_core_vnni")
};
MatmulPeak matmul_peak(Precision p);

}  // namespace vit
