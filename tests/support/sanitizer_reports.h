/* Stream sanitizer reports caught by a callback, for the sanitizer tests
 * (test_sanitizer.c, test_sanitizer_cuda.c).
 *
 * Install on_report with tc_sanitizer_set_report_fn(on_report, NULL). It
 * counts each report and keeps the last one's kind, text and the names of
 * its two operations; reports() answers how many came since it was last
 * called. A test that defines TC_TEST_PRINT_REPORTS before including this
 * also gets the first report of each race kind printed as tcuda prints it,
 * for its log. Header-only: each test has its own state. */
#ifndef TC_TEST_SANITIZER_REPORTS_H
#define TC_TEST_SANITIZER_REPORTS_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>

#include "tcuda/tcuda.h"

static atomic_int nreports;
static tc_sanitizer_race last_kind;
static char last_text[16384], last_cur[64], last_earlier[64];

static void on_report(const tc_sanitizer_report *r, void *ctx)
{
    (void)ctx;
    nreports++;
    last_kind = r->kind;
    snprintf(last_text, sizeof last_text, "%s", r->text);
    snprintf(last_cur, sizeof last_cur, "%s", r->current_op);
    snprintf(last_earlier, sizeof last_earlier, "%s", r->earlier_op);
#ifdef TC_TEST_PRINT_REPORTS
    static atomic_bool printed[4];
    if ((unsigned)r->kind < 4 && !atomic_exchange(&printed[r->kind], true))
        printf("---- a %s report, as printed ----\n%s", tc_sanitizer_race_string(r->kind), r->text);
#endif
}

/* Reports since the last call. */
static int reports(void) { return atomic_exchange(&nreports, 0); }

#endif
