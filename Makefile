.PHONY: up down purge test lint bench
SHELL := /bin/bash

up:     ## Bring the portal and its local GPU cluster up; prints the URL and demo logins
	./scripts/up.sh

down:   ## Stop the portal and the local cluster (state is kept)
	./scripts/down.sh

purge:  ## Stop everything and remove all state outside the clone but the caches (README)
	./scripts/purge.sh

test:   ## Install what the tests need, start the local cluster, run ruff and the whole suite
	./scripts/test.sh

lint:
	ruff check .
