package primeflow

// RecentFixture is recentFixture, for the tests of package primeflow_test.
var RecentFixture = recentFixture
