package ring

import (
	"context"
	"fmt"
	"strings"
	"testing"
)

func TestZZDebugBatch(t *testing.T) {
	ctx := context.Background()
	for _, v := range []struct{ a, w, l bool }{{false, false, false}, {true, false, false}, {false, true, false}, {true, true, true}} {
		dbgRuleA, dbgWalk, dbgList = v.a, v.w, v.l
		for _, cfg := range []struct{ size, batch int }{{1024, 32}, {4096, 128}} {
			c := newCluster(t, cfg.size, 1024, nil)
			c.joinAll(ctx, cfg.batch, true)
			r := 0
			var err error
			hist := ""
			for r = 1; r <= 300; r++ {
				c.round(ctx, true)
				if err = CheckRing(c.nodes); err == nil {
					break
				}
				if r%25 == 0 {
					hist += fmt.Sprintf(" %d", strings.Count(err.Error(), "\n")+1)
				}
			}
			t.Logf("ruleA=%v walk=%v list=%v size %d batch %d: rounds %d ok=%v calls=%d violations/25r:%s", v.a, v.w, v.l, cfg.size, cfg.batch, r, err == nil, c.net.Calls(), hist)
		}
	}
}
