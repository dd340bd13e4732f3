# The two commands of the README (both set everything up first; setup is idempotent), plus the
# engine demo.
.PHONY: setup run test demo

setup:
	./scripts/setup.sh

# The main job: the advanced-RAG comparison (stock LangChain vs accel) on embedded defaults.
run: setup
	mkdir -p out
	.venv/bin/accel bench advanced-rag --framework langchain --mode single --queries 8 \
		--json out/advanced-rag.json --plot out/advanced-rag.png

test: setup
	./scripts/run-tests.sh

demo: setup
	.venv/bin/accel demo
