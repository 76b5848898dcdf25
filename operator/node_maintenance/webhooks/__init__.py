"""The webhooks every replica serves: the HTTPS server, CRD conversion reviews, admission and the serving certificate."""
