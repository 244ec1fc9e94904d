#include "tc_test.h"
int main(void) { return 77; }
