#include "tc_test.h"
int main(void)
{
    TC_TEST_REQUIRE_GPU();
    return 0;
}
