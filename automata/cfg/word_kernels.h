// Word kernels over whole token masks (4,008 words on Llama-3) for the grammar runtime. The
// kernels themselves (set, OR, count, skip, with AVX2 versions picked at run time) are the shared
// ones of automata/token/mask_words.h; this header gives them to automata/cfg under the names its
// files use, and adds the allocation of finished masks. Internal to automata/cfg.
#pragma once

#include <cstddef>
#include <cstdint>

#include "automata/token/mask_words.h"

namespace lockstep::cfg_words {

// Finished masks (read with memcpy and scalar loads: no alignment needed). Not over-aligned:
// glibc serves an aligned request outside its per-thread cache, and right after a big grammar
// was freed that meant sorting its thousands of free chunks inside a fill (a 60-byte mask took
// 450k cycles, 200 µs, in BM_SchemaPrecomputedWarm's slowest fill). Null when out of memory.
std::uint32_t* AllocWords(std::size_t words);
void FreeWords(std::uint32_t* p);

// The same functions as mask_words' (inline ones stay inline): no call in between.
using mask_words::CountOnes;
using mask_words::CountOnes64;
using mask_words::OrWords;
using mask_words::SetBit;
using mask_words::SetBitRecording;
using mask_words::SkipWords;
using mask_words::TestBit;

}  // namespace lockstep::cfg_words
