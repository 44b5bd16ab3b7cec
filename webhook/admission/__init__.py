"""The AdmissionReview wire format and the decision it carries."""
