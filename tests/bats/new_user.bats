#!/usr/bin/env bats
# What a new user sees (issue 28): state shown rather than nothing, the
# user's words rather than the protocol's, and mistakes named.

load helpers
bats_require_minimum_version 1.5.0

@test "ctl jobs: a title, and a line saying there is none" {
	start_idle
	run ctl jobs
	assert_success
	assert_output "jobs: none (checkpoint and reload start one)"
	run ctl jobs --no-legend
	assert_success
	assert_output ""
	ctl checkpoint "$TMP/img" --wait >/dev/null
	run ctl jobs
	assert_success
	assert_line --index 0 "jobs:"
	assert_line --index 1 --regexp "^  job 1 checkpoint +done "
	stop_idle
}
