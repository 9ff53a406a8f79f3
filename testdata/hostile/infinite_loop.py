# Burns CPU forever. Expected: timed_out (wall timeout) or, with a CPU limit,
# limit_exceeded == "cpu" (SIGXCPU).
while True:
    pass
