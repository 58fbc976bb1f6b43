/* lockstep.h: the former name of the C ABI's header, kept so that existing C hosts still build;
 * new code includes lockstep/lockstep_c.h. */
#ifndef LOCKSTEP_LOCKSTEP_H_
#define LOCKSTEP_LOCKSTEP_H_
#include "lockstep/lockstep_c.h"
#endif /* LOCKSTEP_LOCKSTEP_H_ */
