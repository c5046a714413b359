"""The reliability campaign (`make soak`, issue 20): faults during jobs on a real emulated
network (loss on every link, switches SIGKILLed mid-job, controllers restarted while jobs
run, interrupted `make run`s, malformed frames and illegal P4Runtime requests), measured and
written to docs/reliability.md."""
