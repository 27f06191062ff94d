"""The gateway's control protocol in Python: the models generated from the gateway's JSON Schema
(`config`, `reports`), the checks a schema pattern cannot express (`formats`) and the rules between
fields (`rules`). The API, satlab, the benchmarks and the tests all use these; see
docs/ARCHITECTURE.md (*One schema*)."""
