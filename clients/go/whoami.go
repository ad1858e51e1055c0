package rms

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"
)

// AppInfo is an app as RMS shows it to its own API key (GET /v1/apps/me; no secrets).
type AppInfo struct {
	Name          string   `json:"name"`
	ProduceTopics []string `json:"produce_topics"`
	ConsumeTopics []string `json:"consume_topics"`
}

// Me is the app the client's API key belongs to (GET /v1/apps/me). RMS knows a consumer by
// the app of its key: a consumer checks its configured app name against it.
func (c *Client) Me(ctx context.Context) (*AppInfo, error) {
	var app AppInfo
	if err := c.call(ctx, "GET", "/v1/apps/me", nil, &app); err != nil {
		return nil, err
	}
	return &app, nil
}

// ErrWrongApp means the consumer's App is not the app its API key acts as (or RMS knows no
// such key): the consumer refuses to run, since it would skip every record RMS awaits from
// the key's app.
var ErrWrongApp = errors.New("rms: wrong consumer app")

// appCheckSeconds bounds how long [NewConsumer] asks RMS for the key's app.
const appCheckSeconds = 15

// keyOwner is an acker that can ask RMS which app its API key acts as.
type keyOwner interface {
	appOfKey(ctx context.Context) (string, error)
}

func (a HTTPAcker) appOfKey(ctx context.Context) (string, error) {
	app, err := a.Client.Me(ctx)
	if err != nil {
		return "", err
	}
	return app.Name, nil
}

// checkApp refuses (an error wrapping [ErrWrongApp]) an app name that is not the app of the
// acker's API key; an acker without a key, or an RMS that cannot tell (unreachable, or a
// release without GET /v1/apps/me), is logged and let through.
func checkApp(app string, acker Acker, logger *slog.Logger) error {
	owner, ok := acker.(keyOwner)
	if !ok {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), appCheckSeconds*time.Second)
	defer cancel()
	actual, err := owner.appOfKey(ctx)
	var refused *APIError
	switch {
	case errors.As(err, &refused) && refused.Status == 401:
		logger.Error("rms: wrong consumer app: RMS does not know this consumer's API key",
			"app", app, "error", err)
		return fmt.Errorf("%w: RMS does not know this consumer's API key: %v", ErrWrongApp, err)
	case err != nil:
		logger.Warn("rms: could not check the consumer's app against its API key", "app", app,
			"error", err)
		return nil
	case actual != app:
		line := fmt.Sprintf("this consumer is configured as app %q, but its API key is app "+
			"%q's: it would skip every record RMS awaits from %q; refusing to run (set App "+
			"to %q, or use that app's key)", app, actual, actual, actual)
		logger.Error("rms: wrong consumer app: "+line, "app", app, "key_app", actual)
		return fmt.Errorf("%w: %s", ErrWrongApp, line)
	}
	return nil
}
