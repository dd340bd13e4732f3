# The two commands of the README (both set everything up first; setup is idempotent), plus the
# engine demo.
.PHONY: setup run test demo lint

setup:
	./scripts/setup.sh

# The main job: the advanced-RAG comparison (stock LangChain, LlamaDistPC-like, accel) on the
# embedded defaults. `make run ARGS="--ablations --verbose"` adds accel's other policies and
# passes switched off, and shows third-party progress output.
run: setup
	mkdir -p out
	.venv/bin/accel bench advanced-rag --framework langchain --mode single --queries 8 \
		--json out/advanced-rag.json --markdown out/advanced-rag.md --plot out/advanced-rag.png $(ARGS)

test: setup
	./scripts/run-tests.sh

demo: setup
	.venv/bin/accel demo

# The layer contracts of .importlinter (docs/design.md's folder map).
lint: setup
	.venv/bin/lint-imports
