"""Test doubles of the API's neighbours (the gateway daemon's control protocol): for the API's tests, the
dashboard's browser suite and the benchmarks. Never imported by `perigee_api`, never shipped."""
