# Writes one file in the workspace until the file size limit (RLIMIT_FSIZE)
# stops it. CPython ignores SIGXFSZ, so this ends with
# OSError: [Errno 27] File too large -> limit_exceeded == "file_size".
chunk = b"\0" * (1 << 20)
with open("filler.bin", "wb") as f:
    while True:
        f.write(chunk)
        f.flush()
