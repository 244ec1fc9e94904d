/* The README's ten lines: time work on a stream of your own with events. */
#include <stdio.h>

#include <tcuda/tcuda.h>

int main(void)
{
    if (!tc_is_available()) {
        printf("no GPU: %s\n", tc_last_error());
        return 0;
    }
    tc_stream *s;
    tc_event *start, *end;
    float ms;
    tc_stream_create(-1, 0, &s);
    tc_event_create(TC_EVENT_FLAG_TIMING, &start);
    tc_event_create(TC_EVENT_FLAG_TIMING, &end);
    tc_stream_guard g = tc_stream_guard_enter(s); /* like `with torch.cuda.stream(s)` */
    tc_event_record(start, NULL);                 /* ... queue work on the current stream ... */
    tc_event_record(end, NULL);
    tc_stream_guard_exit(&g);
    tc_event_synchronize(end);
    tc_event_elapsed_time(start, end, &ms);
    const char *name = "?";
    tc_get_device_name(TC_CURRENT_DEVICE, &name);
    printf("%s: %.3f ms\n", name, ms);
    tc_event_destroy(start);
    tc_event_destroy(end);
    tc_stream_destroy(s);
    return 0;
}
