# The two commands of the README. Everything else is reachable through bin/krt and npm scripts.
.PHONY: demo test down
demo:
	@bash scripts/setup.sh
	@./bin/krt local up --demo
test:
	@bash scripts/test.sh
down:
	@./bin/krt local down
