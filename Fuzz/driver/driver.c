// Declarations only (include/CFuzzDriver.h); a C target needs one source file.
#include "CFuzzDriver.h"
