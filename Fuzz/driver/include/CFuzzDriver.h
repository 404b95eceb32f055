// libFuzzer's driver, called from each fuzz target's entry point (SwiftPM names an executable's
// entry point MODULE_main and points `main` at it, so libFuzzer's own main is not used).
#include <stddef.h>
#include <stdint.h>
int LLVMFuzzerRunDriver(int *argc, char ***argv, int (*callback)(const uint8_t *data, size_t size));
