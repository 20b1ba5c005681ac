module house

go 1.26.0
