/* Prints where the installed library looks for bundled data: the message of loading a bundled
 * vocabulary that does not exist names the folder ("... bundled ones live in DIR/tokenizers"). */
#include <stdio.h>

#include "lockstep/lockstep_c.h"

int main(void) {
  lockstep_vocab* vocab = NULL;
  if (lockstep_vocab_load("no-such-vocabulary", &vocab) != LOCKSTEP_IO_ERROR) return 1;
  puts(lockstep_last_error());
  return 0;
}
