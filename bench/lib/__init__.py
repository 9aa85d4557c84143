"""The modules of the bench's scripts: run_* are bench/run's, helpers_* are
bench/helpers'. Each script puts bench/ on sys.path and imports them as
lib.<module>; the command lines and the reports are the scripts'."""
