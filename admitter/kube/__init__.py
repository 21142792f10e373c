"""The Kubernetes edge: a JSON client, informers, Events, helpers over objects as the API's own
JSON (`Obj`), their translation into the decision core's values, and the names an install
agrees on. The controller, the webhooks, the kubectl plugin and the dashboard stand on it."""
