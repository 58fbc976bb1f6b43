// The allocation of finished masks (word_kernels.h); the kernels are in
// automata/token/mask_words.cc.
#include "automata/cfg/word_kernels.h"

#include <new>

namespace lockstep::cfg_words {

std::uint32_t* AllocWords(std::size_t words) {
  void* p = ::operator new(words * sizeof(std::uint32_t), std::nothrow);
  return static_cast<std::uint32_t*>(p);
}
void FreeWords(std::uint32_t* p) { ::operator delete(p); }

}  // namespace lockstep::cfg_words
