package main

import (
	"fmt"
	"sync"
	"testing"
)

// The member goroutines of a swarm export save its state at the same
// time: every save succeeds, and the state read back holds every file.
func TestExportStateConcurrentSaves(t *testing.T) {
	dir := t.TempDir()
	st, err := loadExportState(dir)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 8*50)
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 50 {
				st.set(fmt.Sprintf("m%d-f%d.warc.gz", g, i), &exportFile{Name: "f.warc.gz", Size: int64(i), Complete: true})
				if err := st.save(dir); err != nil {
					errs <- err
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("save: %v", err)
	}
	back, err := loadExportState(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(back.Files) != 8*50 {
		t.Errorf("state read back has %d files, want %d", len(back.Files), 8*50)
	}
}

// Two swarm exports into one directory at once: the second is refused.
func TestExportDirLocked(t *testing.T) {
	dir := t.TempDir()
	release, err := lockExportDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := lockExportDir(dir); err == nil {
		t.Fatal("a second export took the directory")
	}
	release()
	again, err := lockExportDir(dir)
	if err != nil {
		t.Fatalf("after the first ended: %v", err)
	}
	again()
}
