// Package layout holds the test that keeps the project's layout its
// architecture: a package's path says what it may import, and the test
// fails the build when an import breaks that (see layout_test.go).
package layout
