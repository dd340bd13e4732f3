# The two commands of the README. Both set everything up first (idempotent).
.PHONY: setup demo test

setup:
	./scripts/setup.sh

demo: setup
	.venv/bin/accel demo

test: setup
	./scripts/run-tests.sh
